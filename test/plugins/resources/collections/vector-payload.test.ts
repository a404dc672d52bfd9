/**
 * The vector payload (plugins/resources/collections/vector-payload.ts): the whole document when its fields
 * fit, the fields it leaves out named, and — since a search may answer from it — its fields and metadata in
 * the key order the database's jsonb gives them, checked against the embedded database itself.
 */
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { openDatabase, type DatabaseHandle } from '../../../../kernel/db/database.js';
import type { DocumentRow } from '../../../../plugins/resources/collections/document-store.js';
import { documentFromPayload, vectorPayload } from '../../../../plugins/resources/collections/vector-payload.js';

const row = (fields: Record<string, unknown>, metadata: Record<string, unknown> = {}): DocumentRow => ({
  document_id: 'doc_1', organization_id: 'org_1', namespace_id: 'ns_1', collection_id: 'col_1', source_key: 'direct:a',
  root_object_id: null, source_collection_id: null, source_document_id: null, processing_tier: 0, fields, metadata,
  owner_principal: 'alice', grants: ['bob'], created_at: new Date('2026-11-29T05:00:00.123Z'), updated_at: new Date('2026-11-29T06:00:00.456Z'),
});

describe('vector payloads', () => {
  let handle: DatabaseHandle;
  beforeAll(async () => {
    const template = inject('pgliteTemplate');
    handle = await openDatabase({ url: undefined, inMemory: true, dataDir: '', ...(template ? { pgliteTemplate: new Blob([template]) } : {}) });
  }, 60_000);
  afterAll(async () => {
    await handle?.close();
  });

  const throughJsonb = async (value: unknown): Promise<string> =>
    ((await handle.db.raw('select (?::jsonb)::text as t', [JSON.stringify(value)])) as { rows: Array<{ t: string }> }).rows[0]!.t;

  it("lists fields and metadata in jsonb's key order, whatever order they were written in", async () => {
    const fields = { zeta: 1.5, b: 'x', aa: true, 'é': 1, e: 2, '日本': 3, '😀': 4, Z: null, ab: 'y' };
    const metadata = { zz: { b: 1, a: [{ d: 1, c: 2 }] }, y: 'x', 'ü': { z: 1, 'ä': 2 } };
    const payload = vectorPayload(row(fields, metadata));
    expect(JSON.stringify(payload.fields)).toBe(JSON.stringify(JSON.parse(await throughJsonb(fields))));
    expect(JSON.stringify(payload.metadata)).toBe(JSON.stringify(JSON.parse(await throughJsonb(metadata))));
  });

  it('holds the whole document when every field fits, and gives it back', () => {
    const written = row({ title: 'short', n: 3 }, { a: 1 });
    const back = documentFromPayload(structuredClone(vectorPayload(written)));
    expect(back).toEqual(written);
  });

  it('names the fields it leaves out, and then is not a document', () => {
    const payload = vectorPayload(row({ title: 'kept', body: 'x'.repeat(1025), tags: ['a'], nested: { a: 1 }, edge: 'y'.repeat(1024) }));
    expect(payload.fields).toEqual({ edge: 'y'.repeat(1024), title: 'kept' });
    expect(payload.omitted_fields).toEqual(['body', 'tags', 'nested']);
    expect(documentFromPayload(payload)).toBeUndefined();
  });

  it('does not take a payload written before payloads held documents for one', () => {
    const { created_at: _c, updated_at: _u, source_key: _k, ...older } = vectorPayload(row({ title: 'old' }));
    expect(documentFromPayload(older)).toBeUndefined();
    expect(documentFromPayload(undefined)).toBeUndefined();
  });
});
