/**
 * Key material. A key is `<type prefix><53 random base62 chars>` (60 characters for `svc_sk_`); only its
 * SHA-256 is ever stored, and `key_prefix` (first 10 characters + `...`) is what lists show.
 */
import { createHash } from 'node:crypto';
import { randomBase62 } from '../ids.js';

export type KeyType = 'standard' | 'user' | 'retriever' | 'marketplace' | 'session';

export const KEY_PREFIXES: Record<KeyType, string> = {
  standard: 'svc_sk_',
  user: 'usr_sk_',
  retriever: 'ret_sk_',
  marketplace: 'sk_marketplace_',
  session: 'ses_sk_',
};

/**
 * Keys bound to one retriever (`bound_retriever_id`): a `ret_sk_` key its owner made for a web page, or a
 * `sk_marketplace_` key another organization got by subscribing. They execute that retriever through the
 * public execute endpoints only, and are refused on every authenticated route (a web page that embeds one
 * shows it to every visitor, so it must not open anything else, not even GET /v1/me).
 */
export type BoundKeyType = Extract<KeyType, 'retriever' | 'marketplace'>;

export function isBoundKeyType(type: KeyType): type is BoundKeyType {
  return type === 'retriever' || type === 'marketplace';
}

/** The key type a secret's prefix claims (undefined for an operator key or anything else). */
export function keyTypeOfSecret(plaintext: string): KeyType | undefined {
  // sk_marketplace_ is checked like the others: no prefix is a prefix of another.
  return (Object.keys(KEY_PREFIXES) as KeyType[]).find((type) => plaintext.startsWith(KEY_PREFIXES[type]));
}

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
