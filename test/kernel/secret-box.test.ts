import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../kernel/secret-box.js';

describe('SecretBox', () => {
  const master = Buffer.from('a deployment signing secret of some length');

  it('seals to a different text each time and opens back to the plain text', () => {
    const box = new SecretBox(master, 'webhook-secrets');
    const a = box.seal('whsec_abc');
    const b = box.seal('whsec_abc');
    expect(a).not.toBe(b);
    expect(a).not.toContain('whsec_abc');
    expect(box.open(a)).toBe('whsec_abc');
    expect(box.open(b)).toBe('whsec_abc');
  });

  it('refuses what another purpose or deployment sealed, tampered or unsealed values', () => {
    const sealed = new SecretBox(master, 'webhook-secrets').seal('whsec_abc');
    expect(() => new SecretBox(master, 'other-purpose').open(sealed)).toThrow();
    expect(() => new SecretBox(Buffer.from('another deployment'), 'webhook-secrets').open(sealed)).toThrow();
    const bytes = Buffer.from(sealed.slice('sealed1:'.length), 'base64');
    bytes[bytes.length - 1]! ^= 1;
    expect(() => new SecretBox(master, 'webhook-secrets').open(`sealed1:${bytes.toString('base64')}`)).toThrow();
    expect(() => new SecretBox(master, 'webhook-secrets').open('whsec_abc')).toThrow('not a sealed secret');
    expect(() => new SecretBox(master, 'webhook-secrets').open('sealed1:AAAA')).toThrow('truncated');
  });
});
