/** A populated source namespace for the namespace template tests, and what they read back from it. */
import { expect } from 'vitest';
import { DatabaseHandle, TaskQueue } from '../../../../kernel/tokens.js';
import type { TestKernel } from '../../../support/kernel.js';

export const DIMS = 384;
export const FEATURE_URI = 'tessera://text_extractor@1.0/text_embedding';

export function unitVector(i: number): number[] {
  const v = Array.from({ length: DIMS }, (_, d) => (d % 7 === i % 7 ? 1 : 0.01 * ((d * (i + 3)) % 5)));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

export const TEXTS = ['a brass lamp', 'a wooden chair', 'a glass lamp shade', 'a velvet sofa', 'an oak table'];

export function apiOf(t: TestKernel) {
  return (method: string, path: string, namespace?: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, ...(namespace ? { headers: { 'X-Namespace': namespace } } : {}), ...(body !== undefined ? { body } : {}) });
}

export const vectorRetriever = (name: string) => ({
  retriever_name: name,
  collection_identifiers: ['c'],
  input_schema: { vector: { type: 'array', required: true } },
  stages: [{ stage_name: 'search', stage_type: 'filter', config: { stage_id: 'feature_search', parameters: {
    searches: [{ feature_uri: FEATURE_URI, query: { vector: '{{inputs.vector}}' }, top_k: 3 }] } } }],
});

export const textRetriever = (name: string, collectionId: string) => ({
  retriever_name: name,
  // By id: instantiation must point it at the copy.
  collection_identifiers: [collectionId],
  input_schema: { q: { type: 'string', required: true } },
  stages: [{ stage_name: 'words', config: { stage_id: 'text_search', parameters: { query: '{{inputs.q}}', top_k: 5 } } }],
});

/**
 * A namespace with a bucket of 5 objects, a collection of 5 documents written with vectors, a collection of 5
 * documents processed from the objects (text indexed), a derived collection and two retrievers.
 */
export async function populate(t: TestKernel, name: string) {
  const api = apiOf(t);
  const ns = await api('POST', '/v1/namespaces', undefined, { namespace_name: name, description: `${name} described`, metadata: { team: 'x' } });
  expect(ns.status, ns.text).toBe(201);
  const bucket = await api('POST', '/v1/buckets', name, { bucket_name: 'b' });
  expect(bucket.status, bucket.text).toBe(201);
  const objectIds: string[] = [];
  for (const [i, title] of TEXTS.entries()) {
    const object = await api('POST', '/v1/buckets/b/objects', name, { key: `o${i}`, metadata: { title }, blobs: [{ property: 'content', text: `${title}, described` }] });
    expect(object.status, object.text).toBe(201);
    objectIds.push(object.body.object_id);
  }
  const collection = await api('POST', '/v1/collections/create', name, {
    collection_name: 'c', source: { type: 'bucket', bucket_id: 'b' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
  });
  expect(collection.status, collection.text).toBe(201);
  const derived = await api('POST', '/v1/collections/create', name, {
    collection_name: 'derived', source: { type: 'collection', collection_id: 'c' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
  });
  expect(derived.status, derived.text).toBe(201);
  const documents = TEXTS.map((text, i) => ({ key: `d${i}`, fields: { text }, metadata: { n: i }, vectors: { text_embedding: unitVector(i) } }));
  const written = await api('POST', '/v1/collections/c/documents/bulk', name, { documents });
  expect(written.status, written.text).toBe(200);
  // Processed documents (with their text index and a reference to the object's stored file).
  const processed = await api('POST', '/v1/collections/create', name, {
    collection_name: 'p', source: { type: 'bucket', bucket_id: 'b' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
  });
  expect(processed.status, processed.text).toBe(201);
  const batch = await api('POST', '/v1/buckets/b/batches', name, { object_ids: objectIds });
  expect(batch.status, batch.text).toBe(201);
  expect((await api('POST', `/v1/buckets/b/batches/${batch.body.batch_id}/submit`, name)).status).toBe(202);
  await t.kernel.services.get(TaskQueue).drain();
  expect((await api('GET', '/v1/collections/p', name)).body.document_count).toBe(TEXTS.length);
  const vector = await api('POST', '/v1/retrievers', name, vectorRetriever('by-vector'));
  expect(vector.status, vector.text).toBe(201);
  const text = await api('POST', '/v1/retrievers', name, textRetriever('by-text', processed.body.collection_id));
  expect(text.status, text.text).toBe(201);
  return {
    namespaceId: ns.body.namespace_id as string,
    bucketId: bucket.body.bucket_id as string,
    collectionId: collection.body.collection_id as string,
    derivedId: derived.body.collection_id as string,
    processedId: processed.body.collection_id as string,
    objectIds,
    documentIds: (written.body.results as Array<{ document_id: string }>).map((r) => r.document_id),
    vectorRetrieverId: vector.body.retriever.retriever_id as string,
    textRetrieverId: text.body.retriever.retriever_id as string,
  };
}

/** Runs queued tasks until the namespace's purge task has completed. */
export async function purged(t: TestKernel, namespaceId: string): Promise<void> {
  const tasks = t.kernel.services.get(TaskQueue);
  const db = t.kernel.services.get(DatabaseHandle).db;
  for (let i = 0; i < 200; i++) {
    await tasks.drain();
    const task = await db('tasks').where({ type: 'namespaces.purge' }).whereRaw("payload->>'namespace_id' = ?", [namespaceId]).first();
    if (task?.status === 'COMPLETED') return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('the namespace purge did not complete');
}
