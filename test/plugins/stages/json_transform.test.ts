import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/json_transform/index.js';
import { MAX_OUTPUT_BYTES } from '../../../plugins/stages/json_transform/templates.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [
    { template: { shout: '{{ doc.fields.text | upcase }}', score: '{{ doc.score }}', owner: '{{ doc.payload.owner_principal }}' }, output_field: 'shaped' },
    { template: { a: 1 } },
    { template: '{{ doc.fields }}', mode: 'replace' },
    { template: ['{{ doc.document_id }}', null, true], output_field: 'list' },
  ],
  invalid: [{}, { template: 'x', output_field: 'a.b' }, { template: 'x', mode: 'field' }, { template: { a: 1 }, output_field: 'a', mode: 'merge' }, { template: 'x', extra: 1 }],
});

describe('json_transform', () => {
  const ctx = (inputs: Record<string, unknown> = {}) =>
    ({ inputs, budget: { maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0 } }) as unknown as StageContext;
  const doc = (id: string, fields: Record<string, unknown>, extra: Partial<StageDocument> = {}): StageDocument => ({
    document_id: id, collection_id: 'col_x', score: 0.75, payload: { owner_principal: 'bob', grants: [], fields, metadata: { lang: 'en' } }, ...extra,
  });
  const run = (template: unknown, docs: StageDocument[], more: Record<string, unknown> = {}, inputs: Record<string, unknown> = {}) =>
    stage.run(ctx(inputs), docs, { template, output_field: 'out', ...more } as never);
  const outOf = async (template: unknown, fields: Record<string, unknown> = {}, inputs: Record<string, unknown> = {}) =>
    (await run(template, [doc('a', fields)], {}, inputs))[0]!.payload!.out;

  it('keeps the JSON type of a leaf that is exactly one expression; other leaves are text', async () => {
    const out = await outOf(
      {
        score: '{{ doc.score }}',
        tags: '{{ doc.fields.tags }}',
        count: '{{ doc.fields.tags | size }}',
        nested: { first: '{{ doc.fields.tags | first }}', flag: '{{ doc.fields.ok }}', obj: '{{ doc.metadata }}' },
        label: 'score={{ doc.score }} id={{ doc.document_id }}',
        padded: ' {{ doc.score }}',
        trimmed: '{{- doc.score -}}',
        literal: [1, false, null, 'plain'],
        rank: '{{ doc.rank }}',
        query: '{{ inputs.q }}',
      },
      { tags: ['x', 'y'], ok: true },
      { q: 3 },
    );
    expect(out).toEqual({
      score: 0.75,
      tags: ['x', 'y'],
      count: 2,
      nested: { first: 'x', flag: true, obj: { lang: 'en' } },
      label: 'score=0.75 id=a',
      padded: ' 0.75',
      trimmed: 0.75,
      literal: [1, false, null, 'plain'],
      rank: 1,
      query: 3,
    });
  });

  it('gives null for a missing value in a typed leaf and empty text in a text leaf', async () => {
    expect(await outOf({ typed: '{{ doc.fields.nope }}', deep: '{{ doc.fields.a.b.c }}', text: '[{{ doc.fields.nope }}]', dflt: '{{ doc.fields.nope | default: "none" }}' })).toEqual({
      typed: null, deep: null, text: '[]', dflt: 'none',
    });
  });

  it('merges into the payload or replaces it, never changing owner_principal or grants', async () => {
    const [merged] = await stage.run(ctx(), [doc('a', { t: 'x' })], { template: { title: '{{ doc.fields.t }}', owner_principal: 'eve', grants: ['eve'] } });
    expect(merged!.payload).toEqual({ owner_principal: 'bob', grants: [], fields: { t: 'x' }, metadata: { lang: 'en' }, title: 'x' });
    const [replaced] = await stage.run(ctx(), [doc('a', { t: 'x' })], { template: '{{ doc.fields }}', mode: 'replace' });
    expect(replaced!.payload).toEqual({ t: 'x', owner_principal: 'bob', grants: [] });
    expect(replaced).toMatchObject({ document_id: 'a', collection_id: 'col_x', score: 0.75 });
    await expect(stage.run(ctx(), [doc('a', { t: 'x' })], { template: '{{ doc.fields.t }}', mode: 'replace' })).rejects.toThrow(/needs an object/);
  });

  it('does not change the documents it was given and sees only them', async () => {
    const input = [doc('a', { n: [1, 2] }), doc('b', { n: [3] })];
    const before = structuredClone(input);
    const out = await run({ ids: '{{ doc.document_id }}', pushed: '{{ doc.fields.n | push: 9 }}' }, input);
    expect(input).toEqual(before);
    expect(out.map((d) => d.payload!.out)).toEqual([{ ids: 'a', pushed: [1, 2, 9] }, { ids: 'b', pushed: [3, 9] }]);
    expect(await run('{{ doc.document_id }}', [])).toEqual([]);
  });

  it('checks templates when defined: syntax, unknown variables, undeclared inputs, file tags, modes', () => {
    const check = (template: unknown, more: Record<string, unknown> = {}, inputNames = ['q']) =>
      stage.check!({ template, output_field: 'o', ...more } as never, { inputNames }).map((p) => [p.path.join('.'), p.message]);
    expect(check({ a: '{{ doc.score }}', b: ['{% for i in (1..3) %}{{ i }}{{ forloop.index }}{% endfor %}'], c: '{% assign x = inputs.q %}{{ x }}' })).toEqual([]);
    expect(check({ a: { b: '{% if %}' } })).toEqual([['template.a.b', expect.stringMatching(/^template\.a\.b does not parse/)]]);
    expect(check({ a: '{{ secret }}', b: '{{ inputs.other }}' })).toEqual([
      ['template.a', expect.stringContaining("reads 'secret'")],
      ['template.b', expect.stringContaining("input 'other', which input_schema does not declare")],
    ]);
    for (const tag of ['{% include "x" %}', '{% render "/etc/passwd" %}', '{% layout "x" %}']) {
      expect(check(tag)).toEqual([['template', expect.stringMatching(/not found/)]]);
    }
    expect(check('text', { output_field: undefined, mode: 'merge' })).toEqual([['template', expect.stringContaining("mode 'merge' needs a template that makes an object")]]);
    expect(check('{{ doc.fields }}', { output_field: undefined, mode: 'replace' })).toEqual([]);
  });

  it('refuses templates nested too deep, too long or with too many values', () => {
    const check = (template: unknown) => stage.check!({ template, output_field: 'o' } as never, { inputNames: [] }).map((p) => p.message);
    let deep: unknown = 'x';
    for (let i = 0; i < 40; i++) deep = { d: deep };
    expect(check(deep)).toEqual([expect.stringContaining('nests deeper than 16 levels')]);
    expect(check('{% if doc.score %}'.repeat(2000) + '{% endif %}'.repeat(2000))).toEqual([expect.stringContaining('nests blocks deeper than 64 levels')]);
    expect(check('x'.repeat(70_000))).toEqual([expect.stringContaining('longer than 65536 characters')]);
    expect(check(Array.from({ length: 1500 }, () => 1))).toEqual([expect.stringContaining('more than 1000 values')]);
  });

  describe('hostile templates fail the stage with the reason, quickly', () => {
    const cases: Array<[string, string, RegExp]> = [
      ['a range of a hundred million', '{% for i in (1..100000000) %}x{% endfor %}', /memory alloc limit exceeded/],
      ['nested loops of a billion steps', '{% for i in (1..1000) %}{% for j in (1..1000) %}{% for k in (1..1000) %}x{% endfor %}{% endfor %}{% endfor %}', /limit exceeded/],
      ['a string doubled by capture', '{% assign s = "xxxxxxxxxx" %}{% for i in (1..40) %}{% capture s %}{{s}}{{s}}{% endcapture %}{% endfor %}{{ s | size }}', /memory alloc limit exceeded/],
      ['a string doubled by append', '{% assign s = "xxxxxxxxxx" %}{% for i in (1..40) %}{% assign s = s | append: s %}{% endfor %}{{ s }}', /memory alloc limit exceeded/],
      ['a giant output', '{% for i in (1..100000) %}{{ doc.fields.text }}{% endfor %}', /renders more than 65536 bytes|limit exceeded/],
      ['a typed value too large', '{{ doc.fields.big }}', /renders more than 65536 bytes of JSON/],
    ];
    for (const [name, template, error] of cases) {
      it(name, async () => {
        const big = Array.from({ length: 10_000 }, (_, i) => `item ${i}`);
        await expect(run(template, [doc('a', { text: 'abcdefghij', big })])).rejects.toThrow(error);
      });
    }

    it('reads no prototype properties', async () => {
      expect(await outOf({ c: '{{ doc.constructor }}', p: '{{ doc.payload.__proto__ }}', f: '{{ doc.fields.text.constructor.name }}' }, { text: 'x' })).toEqual({ c: null, p: null, f: null });
    });

    it('lets other work run while it renders many documents', async () => {
      const docs = Array.from({ length: 2000 }, (_, i) => doc(`d${i}`, { text: 'x' }));
      let ranBetween = false;
      let finished = false;
      setImmediate(() => {
        ranBetween = !finished;
      });
      const out = await run('{% for i in (1..20) %}{{ i }}{% endfor %}', docs);
      finished = true;
      expect(out).toHaveLength(2000);
      expect(ranBetween).toBe(true);
    });
  });

  it('the output limit is documented where users read it', () => {
    expect(stage.description).toContain(`${MAX_OUTPUT_BYTES / 1024} KiB`);
  });
});
