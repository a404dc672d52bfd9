import { describe, expect, it } from 'vitest';
import { fillPlaceholders, placeholdersIn } from '../../../kernel/retrieval/placeholders.js';

describe('{{inputs.<name>}} placeholders', () => {
  it('keeps the input type for a whole-string placeholder and stringifies embedded ones', () => {
    const filled = fillPlaceholders(
      { k: '{{inputs.k}}', ids: '{{ inputs.ids }}', deep: { v: '{{inputs.obj.a}}' }, text: 'top {{inputs.k}} of {{inputs.ids}}', flag: '{{inputs.on}}' },
      { k: 5, ids: ['a', 'b'], obj: { a: 1.5 }, on: false },
    );
    expect(filled).toEqual({ k: 5, ids: ['a', 'b'], deep: { v: 1.5 }, text: 'top 5 of ["a","b"]', flag: false });
  });

  it('gives each stage its own copy of an input: changing it changes neither the inputs nor the next fill', () => {
    const inputs = JSON.parse('{"vector": [0.5, -1, 2], "doc": {"tags": ["a"], "__proto__": {"x": 1}}}') as Record<string, unknown>;
    const first = fillPlaceholders<Record<string, unknown>>({ v: '{{inputs.vector}}', d: '{{inputs.doc}}' }, inputs) as unknown as { v: number[]; d: { tags: string[] } };
    first.v[0] = 99;
    first.d.tags.push('b');
    expect(inputs).toEqual(JSON.parse('{"vector": [0.5, -1, 2], "doc": {"tags": ["a"], "__proto__": {"x": 1}}}'));
    const second = fillPlaceholders<Record<string, unknown>>({ d: '{{inputs.doc}}' }, inputs) as unknown as { d: Record<string, unknown> };
    // A key named __proto__ stays a key of the copy, never its prototype.
    expect(Object.keys(second.d)).toEqual(['tags', '__proto__']);
    expect(Object.getPrototypeOf(second.d)).toBe(Object.prototype);
    expect(second.d).toEqual((inputs as { doc: unknown }).doc);
  });

  it('drops a property, and any list item built around it, when its input is absent', () => {
    const filled = fillPlaceholders(
      {
        limit: '{{inputs.n}}',
        filters: { AND: [{ field: 'a', operator: 'eq', value: 1 }, { field: 'b', operator: 'lte', value: '{{inputs.max}}' }] },
        searches: [{ query: { text: '{{inputs.q}}' } }, { query: { vector: [1, 2] } }],
        label: 'x{{inputs.missing}}y',
      },
      {},
    );
    expect(filled).toEqual({ filters: { AND: [{ field: 'a', operator: 'eq', value: 1 }] }, searches: [{ query: { vector: [1, 2] } }], label: 'xy' });
  });

  it('finds every placeholder with its JSON pointer', () => {
    expect(placeholdersIn({ a: ['{{inputs.x}}', 'n={{inputs.y}}'], 'b/c': '{{inputs.z.w}}' })).toEqual([
      { input: 'x', pointer: '/a/0', whole: true },
      { input: 'y', pointer: '/a/1', whole: false },
      { input: 'z', pointer: '/b~1c', whole: true },
    ]);
  });
});
