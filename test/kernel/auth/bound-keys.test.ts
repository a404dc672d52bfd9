/** Key types bound to one retriever: recognised by prefix, refused on authenticated routes with what they are for. */
import { describe, expect, it } from 'vitest';
import { boundKeyRefusal, looksLikeBoundKey } from '../../../kernel/auth/bound-keys.js';
import { generateKeySecret, isBoundKeyType, keyTypeOfSecret, KEY_PREFIXES } from '../../../kernel/auth/keys.js';

describe('bound keys', () => {
  it('mints sk_marketplace_ keys and tells every key type by its prefix', () => {
    const market = generateKeySecret('marketplace');
    expect(market).toMatch(/^sk_marketplace_[A-Za-z0-9]{53}$/);
    for (const type of Object.keys(KEY_PREFIXES) as Array<keyof typeof KEY_PREFIXES>) {
      expect(keyTypeOfSecret(generateKeySecret(type))).toBe(type);
    }
    expect(keyTypeOfSecret('prk_abc')).toBeUndefined();
    expect(keyTypeOfSecret('svc_sk_test_operator_key')).toBe('standard');
  });

  it('binds retriever and marketplace keys only', () => {
    expect(isBoundKeyType('retriever')).toBe(true);
    expect(isBoundKeyType('marketplace')).toBe(true);
    for (const type of ['standard', 'user', 'session'] as const) expect(isBoundKeyType(type)).toBe(false);
    expect(looksLikeBoundKey(generateKeySecret('retriever'))).toBe(true);
    expect(looksLikeBoundKey(generateKeySecret('marketplace'))).toBe(true);
    expect(looksLikeBoundKey(generateKeySecret('standard'))).toBe(false);
    expect(looksLikeBoundKey('prk_whatever')).toBe(false);
  });

  it('refuses with a 403 that says what the key can do and where', () => {
    for (const type of ['retriever', 'marketplace'] as const) {
      const refusal = boundKeyRefusal(type);
      expect(refusal.status).toBe(403);
      expect(refusal.message).toContain(KEY_PREFIXES[type]);
      expect(refusal.message).toContain('POST /v1/public/retrievers/execute');
      expect(refusal.message).toContain('X-Public-API-Key');
    }
  });
});
