/**
 * Key material. A key is `<type prefix><53 random base62 chars>` (60 characters for `svc_sk_`); only its
 * SHA-256 is ever stored, and `key_prefix` (first 10 characters + `...`) is what lists show.
 */
import { createHash } from 'node:crypto';
import { randomBase62 } from '../ids.js';

export type KeyType = 'standard' | 'user' | 'retriever' | 'session';

export const KEY_PREFIXES: Record<KeyType, string> = {
  standard: 'svc_sk_',
  user: 'usr_sk_',
  retriever: 'ret_sk_',
  session: 'ses_sk_',
};

const SECRET_LENGTH = 53;

export function generateKeySecret(type: KeyType): string {
  return `${KEY_PREFIXES[type]}${randomBase62(SECRET_LENGTH)}`;
}

export function hashKey(plaintext: string): string {
  return createHash('sha256').update(plaintext, 'utf8').digest('hex');
}

export function displayPrefix(plaintext: string): string {
  return `${plaintext.slice(0, 10)}...`;
}

/** A key given by an operator (TESSERA_ADMIN_KEY) must at least be long and unguessable-looking. */
export function isAcceptableOperatorKey(plaintext: string): boolean {
  return /^[\x21-\x7e]{24,200}$/.test(plaintext);
}
