/**
 * The deprecated `prk_` key of a publication. Config and a correct verify must return it, so besides its
 * SHA-256 (for lookup) it is kept sealed: AES-256-GCM under a key derived (HKDF) from the deployment's signing
 * secret, which every API process of one deployment shares.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import { hashKey } from '../../../kernel/auth/keys.js';
import { randomBase62 } from '../../../kernel/ids.js';

export const PUBLIC_KEY_PREFIX = 'prk_';

export function mintPublicKey(): string {
  return `${PUBLIC_KEY_PREFIX}${randomBase62(40)}`;
}

export const publicKeyHash = hashKey;

export class KeySealer {
  private readonly key: Buffer;

  constructor(signingSecret: Buffer) {
    this.key = Buffer.from(hkdfSync('sha256', signingSecret, Buffer.alloc(0), 'tessera published-retriever keys', 32));
  }

  seal(plaintext: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return ['v1', iv.toString('base64'), cipher.getAuthTag().toString('base64'), body.toString('base64')].join('.');
  }

  open(sealed: string): string {
    const [version, iv, tag, body] = sealed.split('.');
    if (version !== 'v1' || !iv || !tag || body === undefined) throw new Error('unreadable sealed key');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64'));
    decipher.setAuthTag(Buffer.from(tag, 'base64'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64')), decipher.final()]).toString('utf8');
  }
}
