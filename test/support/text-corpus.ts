/**
 * A text corpus through the whole pipeline, as several suites need it: texts become objects of a bucket
 * (optionally owned by a principal), a text_extractor collection chunks them one sentence per document,
 * and a batch runs (the test kernel's tasks drained in process) until it ends COMPLETED.
 */
import path from 'node:path';
import { expect } from 'vitest';
import { TaskQueue } from '../../kernel/tokens.js';
import type { TestKernel } from './kernel.js';

const TERMINAL = ['COMPLETED', 'COMPLETED_WITH_ERRORS', 'FAILED', 'CANCELED'];

/** The offline text model the corpus is embedded with (load it in the test kernel's inference worker). */
export const TEXT_MODEL_PLUGIN = path.resolve(__dirname, '../../plugins/models/hashed-ngram-text/index.ts');

export interface CorpusText {
  text: string;
  owner?: string | null;
}

export interface TextCorpus {
  collection: { collection_id: string; collection_name: string; namespace_id: string };
  objectIds: string[];
}

export async function ingestTexts(
  t: TestKernel,
  at: { namespace: string; bucket: string; collection: string },
  texts: ReadonlyArray<string | CorpusText>,
): Promise<TextCorpus> {
  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': at.namespace }, ...(body !== undefined ? { body } : {}) });
  expect((await api('POST', '/v1/buckets', { bucket_name: at.bucket })).status).toBe(201);
  const objectIds: string[] = [];
  for (const [i, item] of texts.entries()) {
    const { text, owner } = typeof item === 'string' ? { text: item, owner: null } : item;
    const res = await api('POST', `/v1/buckets/${at.bucket}/objects`, {
      key: `texts/${i}.txt`,
      blobs: [{ property: 'content', text }],
      ...(owner ? { owner_principal: owner } : {}),
    });
    expect(res.status).toBe(201);
    objectIds.push(res.body.object_id);
  }
  const created = await api('POST', '/v1/collections/create', {
    collection_name: at.collection,
    source: { type: 'bucket', bucket_id: at.bucket },
    feature_extractors: [{ feature_extractor_name: 'text_extractor', parameters: { split_by: 'sentences', chunk_size: 1, chunk_overlap: 0 } }],
  });
  expect(created.status).toBe(201);
  const batch = await api('POST', `/v1/buckets/${at.bucket}/batches`, { object_ids: objectIds });
  expect((await api('POST', `/v1/buckets/${at.bucket}/batches/${batch.body.batch_id}/submit`)).status).toBe(202);
  for (let i = 0; ; i++) {
    await t.kernel.services.get(TaskQueue).drain();
    const res = await api('GET', `/v1/buckets/${at.bucket}/batches/${batch.body.batch_id}`);
    if (TERMINAL.includes(res.body.status)) {
      expect(res.body.status).toBe('COMPLETED');
      break;
    }
    if (i > 600) throw new Error('batch did not finish');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { collection: created.body, objectIds };
}
