/**
 * What extractor tests run against: a real in-process inference worker serving the models the test
 * names, a client to it (a recording subclass when the test counts calls), a local blob store in a temp
 * folder, and the ExtractorContext made of them.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { BlobArtifactWriter } from '../../kernel/blobs/artifacts.js';
import { LocalBlobStore } from '../../kernel/blobs/local.js';
import { InferenceClient, type InferenceClientOptions } from '../../kernel/inference/client.js';
import { startInferenceWorker } from '../../kernel/inference/worker.js';
import type { BlobReference, DocumentDraft, ExtractorContext, ModelPlugin } from '../../kernel/plugins.js';
import { silentLogger } from './logs.js';

export interface ExtractorHarness<C extends InferenceClient> {
  ctx: ExtractorContext;
  client: C;
  blobs: LocalBlobStore;
  /** A scratch folder (the blob store lives under it); removed by cleanup. */
  dir: string;
  /** Stores bytes as an object blob and returns the reference an extractor input carries. */
  putBlob(key: string, bytes: Buffer, contentType: string): Promise<BlobReference>;
  cleanup(): Promise<void>;
}

export interface ExtractorHarnessOptions<C extends InferenceClient> {
  /** Names the temp folder (`tessera-<name>-…`). */
  name: string;
  models: ReadonlyArray<ModelPlugin<never, unknown>>;
  /** Makes the client (default: a plain InferenceClient). */
  client?: (options: InferenceClientOptions) => C;
}

export async function startExtractorHarness<C extends InferenceClient = InferenceClient>(options: ExtractorHarnessOptions<C>): Promise<ExtractorHarness<C>> {
  const log = silentLogger();
  const worker = await startInferenceWorker({ models: options.models, address: '127.0.0.1:0', log });
  const clientOptions: InferenceClientOptions = { addresses: [worker.address], log, timeoutMs: 60_000 };
  const client = options.client ? options.client(clientOptions) : (new InferenceClient(clientOptions) as C);
  const dir = await mkdtemp(path.join(tmpdir(), `tessera-${options.name}-`));
  const blobs = new LocalBlobStore(path.join(dir, 'blobs'), { publicBaseUrl: () => 'http://x', signingSecret: Buffer.alloc(32) });
  const ctx: ExtractorContext = {
    organizationId: 'org_test',
    namespace: { id: 'ns_test', name: 'default' },
    log,
    inference: client,
    blobs,
    artifacts: BlobArtifactWriter.forRecord(blobs, 'org_test', 'col_test', 'obj_test'),
  };
  return {
    ctx,
    client,
    blobs,
    dir,
    async putBlob(key, bytes, contentType) {
      const info = await blobs.put(key, bytes, { contentType });
      return { storage_key: key, content_type: contentType, size_bytes: info.size };
    },
    async cleanup() {
      client.close();
      await worker.stop(0);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Every draft an extraction yields, in order. */
export async function collectDrafts(iterable: AsyncIterable<DocumentDraft>): Promise<DocumentDraft[]> {
  const drafts: DocumentDraft[] = [];
  for await (const draft of iterable) drafts.push(draft);
  return drafts;
}
