/**
 * `document_output_handling: replace`: when a record is processed again and produces fewer documents, the
 * ones it no longer produces are removed with their vectors from every feature index of the collection —
 * also in a process that has not written to that index itself (a restarted one). A vector left behind would
 * keep the removed document in searches, answered from its payload on the embedded default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineExtractor } from '../../../../kernel/plugins.js';
import { CollectionProcessor, VectorIndex } from '../../../../kernel/tokens.js';
import { featureIndexName } from '../../../../kernel/vectors/naming.js';
import builtins from '../../../../plugins/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

/** As many documents as the object's metadata says (`parts`), each with a 4-d vector unless it says `vectors: false`. */
const partsExtractor = defineExtractor({
  name: 'parts_extractor',
  version: '1.0',
  description: 'Test only: one document per part, as many parts as the object metadata says.',
  accepts: ['text/*'],
  inputs: [{ name: 'text', type: 'text', required: true }],
  parameters: { type: 'object', additionalProperties: false, properties: {} },
  features: [{ name: 'vec', dims: 4, distance: 'cosine', model: 'none', optional: true }],
  fields: { type: 'object', additionalProperties: false, required: ['part'], properties: { part: { type: 'integer' } } },
  async *extract(_ctx, input) {
    const parts = Number(input.fields.parts ?? 0);
    for (let part = 0; part < parts; part++) {
      yield { key: `part-${part}`, fields: { part }, ...(input.fields.vectors === false ? {} : { features: { vec: [1, part + 1, 0.5, 0.25] } }) };
    }
  },
});

describe('documents a record no longer produces', () => {
  let t: TestKernel;
  const api = (method: string, p: string, body?: unknown) => t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': 'stale' }, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    t = await startTestKernel({ plugins: [...builtins, partsExtractor], config: { runTasks: false } });
    expect((await t.client().POST('/v1/namespaces', { body: { namespace_name: 'stale' } })).response.status).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('are removed with their vectors, even by a process that never wrote to the index', async () => {
    expect((await api('POST', '/v1/buckets', { bucket_name: 'notes' })).status).toBe(201);
    const created = await api('POST', '/v1/buckets/notes/objects', { key: 'a.txt', metadata: { parts: 3 }, blobs: [{ property: 'content', text: 'three parts' }] });
    expect(created.status, created.text).toBe(201);
    const objectId = created.body.object_id as string;
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'parts', source: { type: 'bucket', bucket_id: 'notes' },
      feature_extractors: [{ feature_extractor_name: 'parts_extractor', document_output_handling: 'replace' }],
    });
    expect(collection.status, collection.text).toBe(201);
    const collectionId = collection.body.collection_id as string;
    const organizationId = (await api('GET', '/v1/me')).body.organization.organization_id as string;
    const processor = t.kernel.services.get(CollectionProcessor);
    const run = () => processor.process({ organizationId, collectionId, recordIds: [objectId], processingTier: 0, origin: 'test' });

    expect((await run()).documents_written).toBe(3);
    const before = (await api('GET', '/v1/collections/parts/documents?limit=10')).body.results as Array<{ document_id: string }>;
    expect(before).toHaveLength(3);

    // The record now makes no document at all, so this run writes to no index; and this process forgets
    // the indexes it made sure of, as a restarted one would have.
    expect((await api('PATCH', `/v1/buckets/notes/objects/${objectId}`, { metadata: { parts: 0 } })).status).toBe(200);
    (processor as unknown as { ensured: Set<string> }).ensured.clear();
    await run();
    expect((await api('GET', '/v1/collections/parts/documents?limit=10')).body.results).toEqual([]);
    const index = featureIndexName(collectionId, 'vec');
    expect(await t.kernel.services.get(VectorIndex).get(index, before.map((d) => d.document_id))).toEqual([]);
    const search = await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['parts'], input_schema: {}, inputs: {},
      stages: [{ stage_name: 's', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://parts_extractor@1.0/vec', query: { vector: [1, 1, 0.5, 0.25] }, top_k: 5 }] } } }],
    });
    expect(search.status, search.text).toBe(200);
    expect(search.body.documents).toEqual([]);
  });

  it("leave a feature's index when written again without that feature", async () => {
    const created = await api('POST', '/v1/buckets/notes/objects', { key: 'b.txt', metadata: { parts: 1 }, blobs: [{ property: 'content', text: 'one part' }] });
    expect(created.status, created.text).toBe(201);
    const objectId = created.body.object_id as string;
    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'optional', source: { type: 'bucket', bucket_id: 'notes' }, feature_extractors: [{ feature_extractor_name: 'parts_extractor' }],
    });
    expect(collection.status, collection.text).toBe(201);
    const collectionId = collection.body.collection_id as string;
    const organizationId = (await api('GET', '/v1/me')).body.organization.organization_id as string;
    const processor = t.kernel.services.get(CollectionProcessor);
    const run = () => processor.process({ organizationId, collectionId, recordIds: [objectId], processingTier: 0, origin: 'test' });
    const search = async () => (await api('POST', '/v1/retrievers/execute', {
      collection_identifiers: ['optional'], input_schema: {}, inputs: {},
      stages: [{ stage_name: 's', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: 'tessera://parts_extractor@1.0/vec', query: { vector: [1, 1, 0.5, 0.25] }, top_k: 5 }] } } }],
    })).body.documents as Array<{ document_id: string }>;

    expect((await run()).documents_written).toBe(1);
    const [found] = await search();
    expect(found).toBeDefined();
    expect((await api('PATCH', `/v1/buckets/notes/objects/${objectId}`, { metadata: { parts: 1, vectors: false } })).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 5)); // a later updated_at than created_at
    expect((await run()).documents_written).toBe(1);
    // The document is still there (written again), but no longer in the vector feature's searches.
    expect((await api('GET', `/v1/collections/optional/documents/${found!.document_id}`)).status).toBe(200);
    expect(await search()).toEqual([]);
  });
});
