import { Container } from 'inversify';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import stage from '../../../plugins/stages/document_enrich/index.js';
import { matchesFilter } from '../../../kernel/filters/filter.js';
import type { StageContext, StageDocument } from '../../../kernel/plugins.js';
import { filterView, type DocumentListQuery, type DocumentSource as DocumentSourceShape } from '../../../kernel/retrieval/documents.js';
import { DocumentSource } from '../../../kernel/tokens.js';
import { NotAllowedError } from '../../../kernel/errors.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [
    { collection: 'contract-docs', source_field: 'chunk_index', target_field: 'chunk_index', fields: ['text'] },
    { collection: 'contract-docs', source_field: 'metadata.sku', target_field: 'fields.sku', output_field: 'product', mode: 'drop' },
  ],
  invalid: [
    {}, { collection: 'x', source_field: 'a' }, { collection: '', source_field: 'a', target_field: 'b' }, { collection: 'x', source_field: 'a..b', target_field: 'b' },
    { collection: 'x', source_field: 'a', target_field: 'b', mode: 'inner' }, { collection: 'x', source_field: 'a', target_field: 'b', fields: [] },
    { collection: 'x', source_field: 'a', target_field: 'b', output_field: 'a.b' }, { collection: 'x', source_field: 'a', target_field: 'b', extra: 1 },
  ],
});

describe('document_enrich edge cases', () => {
  const product = (id: string, fields: Record<string, unknown>, owner: string | null = null): StageDocument => ({
    document_id: id, collection_id: 'col_products', payload: { fields, metadata: {}, owner_principal: owner },
  });
  const products = [
    product('p1', { sku: 'A', title: 'Lamp', price: 10, spec: { watts: 40 } }),
    product('p2', { sku: 'B', title: 'Desk', price: 99 }, 'alice'),
    product('p0', { sku: 'A', title: 'Older lamp', price: 8 }),
    product('p3', { sku: 1, title: 'Numbered', price: 1 }),
    product('p4', { sku: 'C', title: 'Bob only', price: 5 }, 'bob'),
  ];
  function context(principalId: string | null = null, rows = products) {
    const lists: DocumentListQuery[] = [];
    const source = {
      list: async (query: DocumentListQuery) => {
        lists.push(query);
        return rows
          .filter((d) => query.collectionIds.includes(d.collection_id!))
          .filter((d) => !query.principalId || d.payload!.owner_principal === query.principalId)
          .filter((d) => !query.filter || matchesFilter(query.filter, filterView(d)))
          .sort((a, b) => a.document_id.localeCompare(b.document_id))
          .slice(0, query.limit);
      },
    } as unknown as DocumentSourceShape;
    const container = new Container();
    container.bind(DocumentSource).toConstantValue(source);
    const resolved: string[][] = [];
    const ctx: StageContext = {
      organizationId: 'org', namespace: { id: 'ns', name: 'ns' }, collections: [], stageIndex: 1, inputs: {},
      budget: { maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0 },
      principalId, log: pino({ level: 'silent' }), container,
      resolveCollections: async (identifiers) => {
        resolved.push([...identifiers]);
        if (identifiers[0] === 'secret') throw new NotAllowedError("The API key's scopes do not allow read_data on collection 'secret'");
        return [{ collection_id: 'col_products', collection_name: 'products', namespace_id: 'ns' }];
      },
    };
    return { ctx, lists, resolved };
  }
  const order = (id: string, sku: unknown): StageDocument => ({ document_id: id, collection_id: 'col_orders', score: 1, payload: { fields: { sku }, metadata: {} } });
  const orders = () => [order('o1', 'A'), order('o2', 'B'), order('o3', 'a'), order('o4', '1'), order('o5', 1), order('o6', null), order('o7', ['A']), order('o8', 'A')];
  const enrichment = (docs: StageDocument[]) => Object.fromEntries(docs.map((d) => [d.document_id, (d.payload!.fields as Record<string, unknown>).enrichment]));

  it('joins the first match by document id, comparing keys as JSON, in one batched lookup', async () => {
    const { ctx, lists, resolved } = context();
    const out = await stage.run(ctx, orders(), { collection: 'products', source_field: 'sku', target_field: 'sku' });
    expect(resolved).toEqual([['products']]);
    expect(lists).toHaveLength(1);
    expect(lists[0]!.filter!.caseSensitive).toBe(true);
    expect(out.map((d) => d.document_id)).toEqual(['o1', 'o2', 'o3', 'o4', 'o5', 'o6', 'o7', 'o8']);
    expect(enrichment(out)).toEqual({
      o1: { sku: 'A', title: 'Older lamp', price: 8 }, // p0 comes before p1
      o2: { sku: 'B', title: 'Desk', price: 99 },
      o3: undefined, o4: undefined, // 'a' is not 'A', '1' is not 1
      o5: { sku: 1, title: 'Numbered', price: 1 },
      o6: undefined, o7: undefined, // null and lists match nothing
      o8: { sku: 'A', title: 'Older lamp', price: 8 },
    });
    // the incoming documents keep their ids, scores and other fields
    expect(out[0]).toMatchObject({ document_id: 'o1', collection_id: 'col_orders', score: 1, payload: { fields: { sku: 'A' } } });
  });

  it('copies chosen paths under output_field and drops unmatched documents in drop mode', async () => {
    const { ctx } = context();
    const out = await stage.run(ctx, orders(), { collection: 'products', source_field: 'fields.sku', target_field: 'fields.sku', fields: ['title', 'spec.watts', 'missing'], output_field: 'product', mode: 'drop' });
    expect(out.map((d) => d.document_id)).toEqual(['o1', 'o2', 'o5', 'o8']);
    expect((out[1]!.payload!.fields as Record<string, unknown>).product).toEqual({ title: 'Desk' });
    expect((out[0]!.payload!.fields as Record<string, unknown>).product).toEqual({ title: 'Older lamp' });
  });

  it("joins only documents the caller's principal may read", async () => {
    const { ctx, lists } = context('alice');
    const out = await stage.run(ctx, [order('o1', 'A'), order('o2', 'B'), order('o3', 'C')], { collection: 'products', source_field: 'sku', target_field: 'sku' });
    expect(lists[0]!.principalId).toBe('alice');
    expect(enrichment(out)).toEqual({ o1: undefined, o2: { sku: 'B', title: 'Desk', price: 99 }, o3: undefined });
  });

  it('batches many keys, and asks again for keys crowded out of a full page', async () => {
    // 450 keys → 3 lookups of at most 200 keys; key K0 has 2500 matching documents, more than one page holds
    const rows = [
      ...Array.from({ length: 2500 }, (_, i) => product(`a${String(i).padStart(5, '0')}`, { sku: 'K0', n: i })),
      ...Array.from({ length: 449 }, (_, i) => product(`z${String(i).padStart(5, '0')}`, { sku: `K${i + 1}`, n: i + 1 })),
    ];
    const { ctx, lists } = context(null, rows);
    const input = Array.from({ length: 450 }, (_, i) => order(`o${i}`, `K${i}`));
    const out = await stage.run(ctx, input, { collection: 'products', source_field: 'sku', target_field: 'sku', fields: ['n'] });
    expect(out.map((d) => (d.payload!.fields as { enrichment?: { n: number } }).enrichment?.n)).toEqual(Array.from({ length: 450 }, (_, i) => i));
    expect(lists.length).toBe(4);
    for (const q of lists) expect((q.filter!.root.and[0] as { value: unknown[] }).value.length).toBeLessThanOrEqual(200);
  });

  it('fails when the collection is refused, whatever the input; looks nothing up for empty input', async () => {
    const { ctx, lists } = context();
    await expect(stage.run(ctx, orders(), { collection: 'secret', source_field: 'sku', target_field: 'sku' })).rejects.toThrow(/read_data on collection 'secret'/);
    await expect(stage.run(ctx, [], { collection: 'secret', source_field: 'sku', target_field: 'sku' })).rejects.toThrow(/read_data on collection 'secret'/);
    expect(await stage.run(ctx, [], { collection: 'products', source_field: 'sku', target_field: 'sku' })).toEqual([]);
    expect(lists).toHaveLength(0);
    const { resolveCollections: _, ...withoutSeam } = ctx;
    await expect(stage.run(withoutSeam, orders(), { collection: 'products', source_field: 'sku', target_field: 'sku' })).rejects.toThrow(/cannot check access/);
  });
});
