/**
 * Signing secrets in the Standard Webhooks form: `whsec_` and the base64 of the key bytes. Signing:
 * `v1,` + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), several signatures space-separated.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { RequestValidationError } from '../../../kernel/errors.js';

const PREFIX = 'whsec_';
const MIN_KEY_BYTES = 24;
const MAX_KEY_BYTES = 64;

/** The key bytes of a secret, or a 422 naming `loc` when it is not `whsec_` + base64 of 24 to 64 bytes. */
export function secretKey(secret: string, loc: Array<string | number> = ['body', 'secret']): Buffer {
  const encoded = secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : '';
  const key = Buffer.from(encoded, 'base64');
  // Node's decoder skips what is not base64: re-encoding tells whether the text was base64 throughout.
  const canonical = key.toString('base64').replace(/=+$/, '') === encoded.replace(/=+$/, '');
  if (!encoded || !canonical || key.length < MIN_KEY_BYTES || key.length > MAX_KEY_BYTES) {
    throw new RequestValidationError([
      { loc, msg: `must be "${PREFIX}" followed by the base64 of ${MIN_KEY_BYTES} to ${MAX_KEY_BYTES} random bytes`, type: 'value_error.webhook_secret' },
    ]);
  }
  return key;
}

export function generateSecret(): string {
  return `${PREFIX}${randomBytes(32).toString('base64')}`;
}

/** What a webhook shows of its secret: enough to tell two apart, nothing to sign with. */
export function secretHint(secret: string): string {
  return `${PREFIX}…${secret.slice(-4)}`;
}

/** One `v1,<base64>` signature of a message. */
export function signature(secret: string, messageId: string, timestampSeconds: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret)).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The `webhook-signature` header: one signature per secret still in use (two during a rotation). */
export function signatureHeader(secrets: readonly string[], messageId: string, timestampSeconds: number, body: string): string {
  return secrets.map((secret) => signature(secret, messageId, timestampSeconds, body)).join(' ');
}
