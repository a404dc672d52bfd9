import { describe, expect, it } from 'vitest';
import { originAllowed, originMatches } from '../../../kernel/auth/origins.js';

describe('originMatches', () => {
  describe('exact origins', () => {
    it('matches the same origin', () => {
      expect(originMatches('https://app.example.com', 'https://app.example.com')).toBe(true);
      expect(originMatches('http://localhost:3000', 'http://localhost:3000')).toBe(true);
    });

    it('compares hosts and schemes case-insensitively', () => {
      expect(originMatches('https://App.Example.COM', 'https://app.example.com')).toBe(true);
      expect(originMatches('https://app.example.com', 'HTTPS://APP.EXAMPLE.COM')).toBe(true);
    });

    it('refuses another host, a subdomain or a parent domain', () => {
      expect(originMatches('https://app.example.com', 'https://api.example.com')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://x.app.example.com')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://example.com')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://app.example.com.evil.test')).toBe(false);
    });

    it('refuses a scheme mismatch', () => {
      expect(originMatches('https://app.example.com', 'http://app.example.com')).toBe(false);
      expect(originMatches('http://app.example.com', 'https://app.example.com')).toBe(false);
    });

    it('refuses a port mismatch', () => {
      expect(originMatches('https://app.example.com:8443', 'https://app.example.com')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://app.example.com:8443')).toBe(false);
      expect(originMatches('http://localhost:3000', 'http://localhost:3001')).toBe(false);
    });

    it('treats the default port of the scheme as the same origin', () => {
      expect(originMatches('https://app.example.com', 'https://app.example.com:443')).toBe(true);
      expect(originMatches('https://app.example.com:443', 'https://app.example.com')).toBe(true);
      expect(originMatches('http://app.example.com', 'http://app.example.com:80')).toBe(true);
      expect(originMatches('http://app.example.com:80', 'http://app.example.com')).toBe(true);
      // 443 is the default of https only.
      expect(originMatches('http://app.example.com', 'http://app.example.com:443')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://app.example.com:80')).toBe(false);
    });

    it('ignores one trailing slash on either side', () => {
      expect(originMatches('https://app.example.com/', 'https://app.example.com')).toBe(true);
      expect(originMatches('https://app.example.com', 'https://app.example.com/')).toBe(true);
    });

    it('refuses anything that is not a bare http(s) origin', () => {
      expect(originMatches('https://app.example.com', 'null')).toBe(false);
      expect(originMatches('https://app.example.com', '')).toBe(false);
      expect(originMatches('https://app.example.com', 'https://app.example.com/path')).toBe(false);
      expect(originMatches('https://app.example.com', 'ftp://app.example.com')).toBe(false);
      expect(originMatches('https://app.example.com', 'app.example.com')).toBe(false);
      expect(originMatches('not an origin', 'https://app.example.com')).toBe(false);
    });
  });

  describe('wildcard-subdomain origins', () => {
    const pattern = 'https://*.example.com';

    it('matches a subdomain at any depth', () => {
      expect(originMatches(pattern, 'https://app.example.com')).toBe(true);
      expect(originMatches(pattern, 'https://a.b.example.com')).toBe(true);
      expect(originMatches(pattern, 'https://x.y.z.example.com')).toBe(true);
      expect(originMatches(pattern, 'https://APP.Example.com')).toBe(true);
    });

    it('does not match the apex domain', () => {
      expect(originMatches(pattern, 'https://example.com')).toBe(false);
      expect(originMatches(pattern, 'https://.example.com')).toBe(false);
    });

    it('does not match a domain that merely ends with the same letters', () => {
      expect(originMatches(pattern, 'https://evilexample.com')).toBe(false);
      expect(originMatches(pattern, 'https://app.example.com.evil.test')).toBe(false);
      expect(originMatches(pattern, 'https://example.com.app')).toBe(false);
    });

    it('still requires the scheme and port to match', () => {
      expect(originMatches(pattern, 'http://app.example.com')).toBe(false);
      expect(originMatches(pattern, 'https://app.example.com:8443')).toBe(false);
      expect(originMatches(pattern, 'https://app.example.com:443')).toBe(true);
      expect(originMatches('https://*.example.com:8443', 'https://app.example.com:8443')).toBe(true);
      expect(originMatches('https://*.example.com:8443', 'https://app.example.com')).toBe(false);
    });

    it('only treats a leading `*.` as a wildcard', () => {
      expect(originMatches('https://*.example.com', 'https://*.example.com.evil.test')).toBe(false);
      expect(originMatches('https://app.*.com', 'https://app.example.com')).toBe(false);
    });
  });
});

describe('originAllowed', () => {
  it('allows every origin when the list is empty', () => {
    expect(originAllowed([], 'https://anything.test')).toBe(true);
  });

  it('allows an origin that matches any entry', () => {
    const list = ['https://app.example.com', 'https://*.partner.test', 'http://localhost:5173'];
    expect(originAllowed(list, 'https://app.example.com')).toBe(true);
    expect(originAllowed(list, 'https://eu.cdn.partner.test')).toBe(true);
    expect(originAllowed(list, 'http://localhost:5173')).toBe(true);
  });

  it('refuses an origin that matches no entry', () => {
    const list = ['https://app.example.com', 'https://*.partner.test'];
    expect(originAllowed(list, 'https://partner.test')).toBe(false);
    expect(originAllowed(list, 'https://evil.test')).toBe(false);
    expect(originAllowed(list, 'null')).toBe(false);
  });
});
