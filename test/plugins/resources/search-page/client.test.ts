/**
 * The search page script's pure parts (loaded outside a browser, where it starts nothing and exposes them):
 * how a result becomes a card per field_mappings, field_order and field_config, and which addresses it keeps.
 */
import { readFileSync } from 'node:fs';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';

interface Helpers {
  safeHref(raw: unknown, allowDataImage: boolean): string | null;
  fieldValue(doc: unknown, name: string): unknown;
  formatValue(value: unknown, format?: Record<string, unknown>): { kind: string; text: string; href: string | null } | null;
  cardModel(doc: unknown, config: Record<string, unknown>, position: number): Record<string, any>;
}

function loadHelpers(): Helpers {
  const source = readFileSync(new URL('../../../../plugins/resources/search-page/assets/search-page.js', import.meta.url), 'utf8');
  const sandbox: { searchPageHelpers?: Helpers } = {};
  vm.runInNewContext(source, sandbox);
  return sandbox.searchPageHelpers!;
}

const h = loadHelpers();

describe('search page script helpers', () => {
  it('formats fields per field_config: label, prefix, decimals, truncate', () => {
    expect(h.formatValue(12.5, { format: 'currency', prefix: '€', decimals: 2 })).toEqual({ kind: 'text', text: '€12.50', href: null });
    expect(h.formatValue('3.14159', { format: 'number', decimals: 1 })!.text).toBe('3.1');
    expect(h.formatValue(0.256, { format: 'percent', decimals: 0 })!.text).toBe('26%');
    expect(h.formatValue('A lamp with a brass stem and a linen shade', { truncate: 20 })!.text).toBe('A lamp with a brass\u2026');
    expect(h.formatValue('2024-03-05T10:00:00Z', { format: 'date' })!.text).toBe('2024-03-05');
    expect(h.formatValue(true, {})!.text).toBe('Yes');
    expect(h.formatValue(['a', 'b'], {})!.text).toBe('a, b');
    expect(h.formatValue(null, {})).toBeNull();
    expect(h.formatValue('https://shop.example/x', { format: 'url' })).toEqual({ kind: 'link', text: 'https://shop.example/x', href: 'https://shop.example/x' });
    expect(h.formatValue('javascript:alert(1)', { format: 'url' })).toEqual({ kind: 'text', text: 'javascript:alert(1)', href: null });
    expect(h.formatValue({ url: '/v1/storage/blobs/t' }, { format: 'image' })).toEqual({ kind: 'image', text: '', href: '/v1/storage/blobs/t' });
    expect(h.formatValue('javascript:alert(1)', { format: 'image' })).toBeNull();
  });

  it('keeps only http(s), same-site and (images) data:image addresses', () => {
    expect(h.safeHref('https://a.example/x', false)).toBe('https://a.example/x');
    expect(h.safeHref('/p/x', false)).toBe('/p/x');
    expect(h.safeHref('data:image/png;base64,AAAA', true)).toBe('data:image/png;base64,AAAA');
    for (const bad of ['javascript:alert(1)', ' JAVASCRIPT:alert(1)', 'data:text/html,<script>', '//evil.example', '/\\evil', 'vbscript:x']) {
      expect(h.safeHref(bad, true), bad).toBeNull();
    }
    expect(h.safeHref('data:image/svg+xml;base64,AAAA', true)).toBeNull();
  });

  it('finds fields at the top level, in fields, in payload.fields and by dotted path', () => {
    expect(h.fieldValue({ name: 'a' }, 'name')).toBe('a');
    expect(h.fieldValue({ payload: { fields: { name: 'b' } } }, 'name')).toBe('b');
    expect(h.fieldValue({ fields: { dims: { w: 3 } } }, 'dims.w')).toBe(3);
    expect(h.fieldValue({ payload: { metadata: { sku: 'x1' } } }, 'sku')).toBe('x1');
    expect(h.fieldValue({ payload: { 'dims.w': 7 } }, 'dims.w')).toBe(7);
    expect(h.fieldValue({}, '__proto__')).toBeUndefined();
  });

  it('builds a card from field_mappings and field_order, with the rest of the exposed fields as details', () => {
    const config = {
      exposedFields: ['name', 'price', 'summary', 'image_url', 'link', 'rating', 'sku'],
      fieldMappings: { title: 'name', thumbnail: 'image_url', url: 'link', description: 'summary' },
      fieldConfig: { price: { format: 'currency', label: 'Price', prefix: '€', decimals: 2 }, summary: { truncate: 12 } },
      card: { fieldOrder: ['price', 'rating'], showThumbnail: true },
    };
    const doc = { document_id: 'doc_1', name: 'Brass lamp', price: 40, summary: 'A lovely brass lamp', image_url: '/img/1.png', link: 'https://shop.example/1', rating: 4.5, sku: 'L-1' };
    expect(h.cardModel(doc, config, 0)).toEqual({
      documentId: 'doc_1',
      title: 'Brass lamp',
      description: 'A lovely\u2026',
      thumbnail: '/img/1.png',
      url: 'https://shop.example/1',
      fields: [
        { name: 'price', label: 'Price', kind: 'text', text: '€40.00', href: null },
        { name: 'rating', label: null, kind: 'text', text: '4.5', href: null },
      ],
      details: [{ name: 'sku', label: 'sku', kind: 'text', text: 'L-1', href: null }],
    });
    const bare = h.cardModel({ document_id: 'doc_2', link: 'javascript:alert(1)' }, { ...config, card: { fieldOrder: [], showThumbnail: false } }, 4);
    expect(bare).toMatchObject({ title: 'Result 5', url: null, thumbnail: null });
  });
});
