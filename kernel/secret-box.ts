/**
 * Secrets the service must read back (webhook signing secrets) are stored sealed: AES-256-GCM under a key
 * derived (HKDF) from the deployment's signing secret and the purpose, so a copy of the database alone
 * does not reveal them, and one purpose's key never opens another's. Every process of a deployment shares
 * the signing secret (TESSERA_SIGNING_SECRET, or the one kept in the data folder), so each can open them.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const PREFIX = 'sealed1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class SecretBox {
  private readonly key: Buffer;

  constructor(masterSecret: Buffer, purpose: string) {
    this.key = Buffer.from(hkdfSync('sha256', masterSecret, Buffer.alloc(0), `tessera:${purpose}`, 32));
  }

  seal(plain: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return PREFIX + Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64');
  }

  /** The plain text; throws when the value was not sealed by this key (another deployment's secret, or tampered). */
  open(sealed: string): string {
    if (!sealed.startsWith(PREFIX)) throw new Error('not a sealed secret');
    const bytes = Buffer.from(sealed.slice(PREFIX.length), 'base64');
    if (bytes.length < IV_BYTES + TAG_BYTES) throw new Error('sealed secret is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key, bytes.subarray(0, IV_BYTES));
    decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
  }
}
