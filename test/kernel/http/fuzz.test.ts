/**
 * Schema-driven fuzzing of every operation the service documents. The operations come from the served
 * GET /v1/openapi.json, so a route added later is fuzzed too. Each gets REQUESTS_PER_OPERATION requests
 * (fixed seed) that break one thing in an otherwise plausible request, with real resource names some of
 * the time so that the handlers' deeper paths run; and a few without a key or with a bad one.
 *
 * Fails on any 5xx, any request without an answer within REQUEST_TIMEOUT_MS, any error body that is not
 * exactly ErrorResponse or (422) HTTPValidationError, and a /v1/health that stops answering between
 * phases. Every failure is collected and reported at the end, each with the request that replays it.
 */
import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TaskQueue } from '../../../kernel/tokens.js';
import {
  Random,
  RequestGenerator,
  describeRequest,
  errorShapeProblem,
  operationsOf,
  type ApiDocument,
  type Fixtures,
  type FuzzRequest,
  type Operation,
} from '../../support/fuzz.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

/** Fixed, so a failure replays; FUZZ_SEED explores other inputs (a failure it finds is reproduced by it). */
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 0x7e55e7a;
const REQUESTS_PER_OPERATION = 32;
const REQUEST_TIMEOUT_MS = 10_000;
/** After this many requests in a row without an answer the service is stalled: the rest is not sent. */
const GIVE_UP_AFTER_HANGS = 3;
const NAMESPACE = 'fuzz';

/** Methods that may destroy the fixtures run last, so every other operation sees them. */
const METHOD_ORDER: Record<string, number> = { GET: 0, POST: 1, PUT: 1, PATCH: 2, DELETE: 3 };

interface Outcome {
  sent: number;
  failures: string[];
  consecutiveHangs: number;
}

describe('schema-driven fuzzing of every documented operation', () => {
  let t: TestKernel;
  let operations: Operation[];
  let fixtures: Fixtures;
  const outcome: Outcome = { sent: 0, failures: [], consecutiveHangs: 0 };
  /** FUZZ_TRACE=<file> writes every request and its answer there (to see what the fuzzing reaches). */
  const trace: string[] | undefined = process.env.FUZZ_TRACE ? [] : undefined;

  const api = (method: string, path: string, body?: unknown) =>
    t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': NAMESPACE }, ...(body !== undefined ? { body } : {}) });

  async function created(method: string, path: string, body?: unknown): Promise<Record<string, any>> {
    const res = await api(method, path, body);
    if (res.status >= 300) throw new Error(`fixture ${method} ${path} answered ${res.status}: ${res.text}`);
    return res.body as Record<string, any>;
  }

  beforeAll(async () => {
    // Tasks are run by the test (drained between phases), so a queued batch cannot outlive its phase unseen.
    t = await startTestKernel({ config: { runTasks: false } });
    const doc = (await t.request('GET', '/v1/openapi.json')).body as ApiDocument;
    operations = operationsOf(doc).sort((a, b) => (METHOD_ORDER[a.method] ?? 1) - (METHOD_ORDER[b.method] ?? 1));

    // Resources of every kind, so that real names reach the handlers' deeper paths.
    const namespace = (await t.client().POST('/v1/namespaces', { body: { namespace_name: NAMESPACE } })).data!;
    const bucket = await created('POST', '/v1/buckets', { bucket_name: 'fuzz-bucket' });
    const object = await created('POST', '/v1/buckets/fuzz-bucket/objects', {
      key: 'fuzz/a.txt',
      metadata: { topic: 'lamps', n: 1, when: '2024-01-01T00:00:00Z' },
      blobs: [{ property: 'content', text: 'Lighthouses guide ships. Their lamps turn all night.' }],
    });
    const fetched = await created('GET', `/v1/buckets/fuzz-bucket/objects/${object.object_id}?return_presigned_urls=true`);
    const upload = await created('POST', '/v1/buckets/fuzz-bucket/uploads', { filename: 'b.txt', file_size_bytes: 5 });
    const collection = await created('POST', '/v1/collections/create', {
      collection_name: 'fuzz-docs',
      source: { type: 'bucket', bucket_id: 'fuzz-bucket' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
    });
    const processed = await created('POST', '/v1/buckets/fuzz-bucket/batches', { object_ids: [object.object_id] });
    await created('POST', `/v1/buckets/fuzz-bucket/batches/${processed.batch_id}/submit`);
    await t.kernel.services.get(TaskQueue).drain();
    const documents = await created('GET', '/v1/collections/fuzz-docs/documents');
    const draft = await created('POST', '/v1/buckets/fuzz-bucket/batches', { object_ids: [object.object_id] });
    await created('POST', '/v1/organizations/users', { email: 'fuzz@example.test' });
    const key = await created('POST', '/v1/organizations/users/fuzz@example.test/api-keys', { name: 'fuzz-key' });
    const retriever = await created('POST', '/v1/retrievers', {
      retriever_name: 'fuzz-retriever',
      collection_identifiers: ['fuzz-docs'],
      input_schema: { q: { type: 'string' } },
      stages: [{ stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'topic', operator: 'eq', value: '{{inputs.q}}' }] } } } }],
    });
    const execution = await created('POST', '/v1/retrievers/fuzz-retriever/execute', { inputs: { q: 'lamps' } });
    const template = await created('POST', '/v1/namespaces/templates', { template_name: 'fuzz-template', source_namespace: NAMESPACE });
    // A webhook on a name that never resolves: deliveries the fuzzed requests cause fail at once and wait for a retry.
    const webhook = await created('POST', '/v1/organizations/webhooks', {
      url: 'https://hooks.fuzz.invalid/tessera', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', event_types: ['object.created', 'batch.completed'],
    });

    const tokenOf = (url: unknown) => (typeof url === 'string' ? [url.split('/v1/storage/blobs/')[1]!.split('?')[0]!] : []);
    fixtures = {
      name: [NAMESPACE, namespace.namespace_id],
      bucket_identifier: ['fuzz-bucket', bucket.bucket_id],
      bucket_id: ['fuzz-bucket', bucket.bucket_id],
      object_id: [object.object_id],
      object_ids: [[object.object_id]],
      upload_id: [upload.upload_id],
      batch_id: [draft.batch_id, processed.batch_id],
      collection_identifier: ['fuzz-docs', collection.collection_id],
      collection_id: ['fuzz-docs', collection.collection_id],
      document_id: documents.results.map((d: { document_id: string }) => d.document_id),
      user_email: ['fuzz@example.test'],
      key_name: ['fuzz-key'],
      key_id: [key.key_id],
      token: [...tokenOf(upload.presigned_url), ...tokenOf(fetched.blobs?.[0]?.url)],
      feature_extractor_name: ['passthrough_extractor', 'text_extractor'],
      property: ['content'],
      retriever_id: ['fuzz-retriever', retriever.retriever.retriever_id],
      execution_id: [execution.execution_id],
      collection_identifiers: [['fuzz-docs'], [collection.collection_id]],
      stage_id: ['attribute_filter', 'feature_search', 'sort_attribute', 'limit'],
      template_id: ['fuzz-template', template.template_id],
      source_namespace: [NAMESPACE, namespace.namespace_id],
      webhook_id: [webhook.webhook_id],
    };
  }, 120_000);

  afterAll(async () => {
    if (trace) await writeFile(process.env.FUZZ_TRACE!, `${trace.join('\n')}\n`);
    await t?.stop();
  });

  async function send(request: FuzzRequest, key: string | null): Promise<void> {
    const headers: Record<string, string> = { ...request.headers };
    if (key !== null) headers.Authorization = key;
    if (outcome.consecutiveHangs >= GIVE_UP_AFTER_HANGS) return;
    outcome.sent++;
    let res: Response;
    let text: string;
    try {
      res = await fetch(`${t.url}${request.path}`, {
        method: request.method,
        headers,
        redirect: 'manual',
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        ...(request.body !== undefined ? { body: request.body } : {}),
      });
      text = await res.text();
    } catch (err) {
      const e = err as Error & { cause?: Error };
      if (e.name === 'TimeoutError' || e.cause?.name === 'TimeoutError') {
        outcome.consecutiveHangs++;
        outcome.failures.push(`no answer within ${REQUEST_TIMEOUT_MS} ms: ${describeRequest(request)}`);
        if (outcome.consecutiveHangs >= GIVE_UP_AFTER_HANGS) outcome.failures.push('the service stopped answering: the remaining requests were not sent');
      } else if (e.cause) {
        outcome.failures.push(`connection failed (${e.cause.message}): ${describeRequest(request)}`);
      }
      // Without a cause fetch refused to build the request (a header it will not send): nothing reached the service.
      return;
    }
    outcome.consecutiveHangs = 0;
    trace?.push(`${res.status} ${describeRequest(request)} → ${text.slice(0, 200)}`);
    const where = `${res.status} for ${describeRequest(request)}${key === null ? ' (no key)' : ''}`;
    if (res.status >= 500) {
      outcome.failures.push(`${where} → ${text.slice(0, 300)}${loggedCause(res.headers.get('x-request-id'))}`);
    } else if (res.status >= 400 && request.method !== 'HEAD') {
      // An error the operation documents as a page for people is HTML; any other is ErrorResponse or HTTPValidationError.
      const htmlPage = (res.headers.get('content-type') ?? '').startsWith('text/html');
      if (htmlPage && operations.find((op) => op.operationId === request.operationId)?.htmlErrorStatuses.includes(res.status)) return;
      const problem = errorShapeProblem(res.status, text);
      if (problem) outcome.failures.push(`${where}: ${problem} → ${text.slice(0, 300)}`);
    }
  }

  /** What the service logged about a failed request (its error), to say where the 500 came from. */
  function loggedCause(requestId: string | null): string {
    if (!requestId) return '';
    for (const line of t.logs) {
      if (!line.includes(requestId) || !line.includes('"err"')) continue;
      const err = (JSON.parse(line) as { err?: { type?: string; message?: string; stack?: string } }).err;
      const frame = err?.stack?.split('\n').find((l) => /\/(kernel|plugins)\//.test(l))?.trim();
      return ` | logged: ${err?.type ?? 'Error'}: ${err?.message?.slice(0, 200) ?? ''}${frame ? ` ${frame}` : ''}`;
    }
    return '';
  }

  async function expectHealthy(phase: string): Promise<void> {
    try {
      const res = await fetch(`${t.url}/v1/health`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      if (res.status !== 200) outcome.failures.push(`GET /v1/health answered ${res.status} after ${phase}: ${await res.text()}`);
    } catch (err) {
      outcome.failures.push(`GET /v1/health did not answer after ${phase}: ${(err as Error).message}`);
    }
  }

  it(
    'answers every request with a documented status and error shape, and stays responsive',
    async () => {
      const rng = new Random(SEED);
      const doc = (await t.request('GET', '/v1/openapi.json')).body as ApiDocument;
      const fuzz = new RequestGenerator(doc, rng, fixtures, NAMESPACE);
      expect(operations.length).toBeGreaterThan(50);

      // Phase 1: no key, an unknown key, a malformed header.
      for (const op of operations) {
        const [request] = fuzz.requestsFor(op, 1);
        await send({ ...request!, label: `${request!.label}, no key` }, null);
        await send({ ...request!, label: `${request!.label}, unknown key` }, `Bearer svc_sk_${'0'.repeat(48)}`);
        await send({ ...request!, label: `${request!.label}, malformed key` }, rng.pick(['Bearer', 'Basic Zm9vOmJhcg==', `Bearer ${'x'.repeat(5000)}`, 'Bearer \u00e9']));
      }
      await expectHealthy('requests without a valid key');

      // Phase 2: every operation with the admin key, each request breaking one thing.
      for (const op of operations) {
        for (const request of fuzz.requestsFor(op, REQUESTS_PER_OPERATION)) await send(request, `Bearer ${t.adminKey}`);
        await expectHealthy(`fuzzing ${op.method} ${op.path}`);
      }

      // Phase 3: whatever the fuzzed requests queued (batches submitted with fuzzed collections) runs now.
      const drained = await Promise.race([
        t.kernel.services.get(TaskQueue).drain().then(() => 'done' as const),
        new Promise<'stalled'>((resolve) => setTimeout(() => resolve('stalled'), 60_000).unref()),
      ]).catch((err: Error) => `failed: ${err.message}`);
      if (drained !== 'done') outcome.failures.push(`running the queued tasks ${drained}`);
      await expectHealthy('running the queued tasks');

      const summary = `${outcome.failures.length} failures in ${outcome.sent} requests over ${operations.length} operations`;
      if (outcome.failures.length > 0) throw new Error(`${summary} (seed ${SEED}):\n${outcome.failures.join('\n')}`);
      expect(outcome.sent).toBeGreaterThan(operations.length * REQUESTS_PER_OPERATION);
    },
    600_000,
  );
});
