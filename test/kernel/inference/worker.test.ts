/** The Inference gRPC service in process: every RPC round trip, error mapping, deadlines, batching, failover. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InputError, NotFoundError, ServiceUnavailableError } from '../../../kernel/errors.js';
import { chunkInputs, InferenceClient, parseInferenceAddresses } from '../../../kernel/inference/client.js';
import { startInferenceWorker, type InferenceWorker } from '../../../kernel/inference/worker.js';
import { silentLogger } from '../../support/logs.js';
import { charVector, createTestModels, type TestModelLog } from './models.js';

const log = silentLogger();

describe('inference worker and client', () => {
  let worker: InferenceWorker;
  let modelLog: TestModelLog;
  let client: InferenceClient;

  beforeAll(async () => {
    const test = createTestModels();
    modelLog = test.log;
    worker = await startInferenceWorker({ models: test.models, address: '127.0.0.1:0', log, maxBatch: 5 });
    client = new InferenceClient({ addresses: [worker.address], log, maxBatch: 16, timeoutMs: 10_000 });
  });

  afterAll(async () => {
    client.close();
    await worker.stop(0);
  });

  it('embeds text, one vector per text in order', async () => {
    const texts = ['hello world', 'a', 'tessera mosaic tiles'];
    expect(await client.embedText('chars', texts)).toEqual(texts.map(charVector));
    expect(await client.embedText('chars', [])).toEqual([]);
  });

  it('embeds images with extras', async () => {
    const result = await client.embedImage('pixels', [Buffer.from([7, 8, 9]), new Uint8Array([1])]);
    expect(result).toEqual([
      { vector: [3, 7], extras: { bytes: 3 } },
      { vector: [1, 1], extras: { bytes: 1 } },
    ]);
  });

  it('embeds audio clips (samples travel as floats)', async () => {
    const [clip] = await client.embedAudio('tones', [{ samples: Float32Array.of(0.5, -0.5, 0.25, 0.25), sampleRate: 16_000 }]);
    expect(clip!.vector[0]).toBe(16_000);
    expect(clip!.vector[1]).toBe(4);
    expect(clip!.vector[2]).toBeCloseTo(0.125, 6);
    expect(clip!.extras).toEqual({ clipped: false });
    // A model without extras gives an empty object.
    const [text] = await client.embedText('chars', ['x']);
    expect(text).toEqual([1, 0, 0]);
  });

  it('reads text with its boxes', async () => {
    const [result] = await client.ocr('reader', [Buffer.from('STOP')]);
    expect(result).toEqual({ text: 'STOP', boxes: [{ text: 'STOP', confidence: 0.5, x: 1, y: 2, width: 4, height: 10 }] });
  });

  it('reranks documents, one score each, in order', async () => {
    const scores = await client.rerank('overlap', 'red apple pie', ['green pear', 'red apple', 'apple pie with red cream']);
    expect(scores).toEqual([0, 2, 3]);
  });

  it('lists models with task, dims and whether they are loaded', async () => {
    const models = await client.listModels();
    expect(models.map((m) => m.name)).toEqual(['chars', 'pixels', 'tones', 'reader', 'overlap', 'stuck', 'picky', 'broken']);
    expect(models.find((m) => m.name === 'chars')).toEqual({ name: 'chars', task: 'embed_text', dims: 3, loaded: true });
    expect(models.find((m) => m.name === 'picky')).toMatchObject({ task: 'embed_text', dims: null, loaded: false });
  });

  it('reports health', async () => {
    const health = await client.health();
    expect(health.ok).toBe(true);
    expect(health.workers).toEqual([
      {
        address: worker.address,
        status: 'serving',
        inFlight: 0,
        pid: process.pid,
        rssBytes: expect.any(Number),
        heapUsedBytes: expect.any(Number),
        // Models load on first use; earlier tests in this file have called these.
        loadedModels: expect.any(Array),
        modelThreads: expect.any(Number),
      },
    ]);
    expect(health.workers[0]!.rssBytes).toBeGreaterThan(0);
  });

  it('loads each model once, lazily, even under concurrent first calls', async () => {
    expect(modelLog.loads.get('overlap')).toBe(1);
    await Promise.all(Array.from({ length: 5 }, () => client.embedText('chars', ['x'])));
    expect(modelLog.loads.get('chars')).toBe(1);
    expect(modelLog.loads.has('stuck')).toBe(false);
  });

  it('maps an unknown model to NotFoundError', async () => {
    await expect(client.embedText('nope', ['x'])).rejects.toBeInstanceOf(NotFoundError);
  });

  it('maps bad input to InputError: a model of another task, a model refusing input, empty payloads', async () => {
    await expect(client.embedText('pixels', ['x'])).rejects.toBeInstanceOf(InputError);
    await expect(client.embedText('picky', ['fine', ''])).rejects.toThrow(new InputError('picky cannot embed an empty text'));
    await expect(client.embedImage('pixels', [new Uint8Array()])).rejects.toBeInstanceOf(InputError);
    await expect(client.embedAudio('tones', [{ samples: [0.1], sampleRate: 0 }])).rejects.toBeInstanceOf(InputError);
    await expect(client.embedText('', ['x'])).rejects.toBeInstanceOf(InputError);
  });

  it('maps a model crash to a plain Error, not retried', async () => {
    const error = await client.embedText('broken', ['x']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(ServiceUnavailableError);
    expect((error as Error).message).toMatch(/INTERNAL.*out of cheese/);
  });

  it('ends a call at its deadline: DEADLINE_EXCEEDED after retries becomes ServiceUnavailableError', async () => {
    const strict = new InferenceClient({ addresses: [worker.address], log, timeoutMs: 200, retries: 1, backoffMs: 10 });
    try {
      const error = await strict.embedText('stuck', ['x']).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ServiceUnavailableError);
      expect((error as ServiceUnavailableError).details).toEqual({ code: 'DEADLINE_EXCEEDED' });
      // The abandoned calls are no longer counted as work in flight.
      expect((await strict.health()).workers[0]!.inFlight).toBe(0);
    } finally {
      strict.close();
    }
  });

  it('splits large inputs into batches and keeps their order', async () => {
    modelLog.batches.delete('chars');
    const texts = Array.from({ length: 100 }, (_, i) => 'ab '.repeat(i));
    expect(await client.embedText('chars', texts)).toEqual(texts.map(charVector));
    const batches = modelLog.batches.get('chars')!;
    // Client batches of ≤ 16, each run by the worker in slices of ≤ 5.
    expect(batches.reduce((a, b) => a + b, 0)).toBe(100);
    expect(Math.max(...batches)).toBeLessThanOrEqual(5);
  });

  it('chunks by count and by bytes', () => {
    expect(chunkInputs([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(chunkInputs(['aaaa', 'bb', 'cc', 'dddddd', 'e'], 10, 5, (s) => s.length)).toEqual([['aaaa'], ['bb', 'cc'], ['dddddd'], ['e']]);
    expect(parseInferenceAddresses(' a:1, b:2 ,,')).toEqual(['a:1', 'b:2']);
  });
});

describe('failover', () => {
  it('keeps answering when one of two workers goes away', async () => {
    const a = await startInferenceWorker({ models: createTestModels().models, address: '127.0.0.1:0', log });
    const b = await startInferenceWorker({ models: createTestModels().models, address: '127.0.0.1:0', log });
    const client = new InferenceClient({ addresses: [a.address, b.address], log, timeoutMs: 5_000, backoffMs: 10 });
    try {
      const before = await client.health();
      expect(before.workers.map((w) => w.status)).toEqual(['serving', 'serving']);
      await a.stop(0);
      for (let i = 0; i < 20; i++) expect(await client.embedText('chars', [`call ${i}`])).toEqual([charVector(`call ${i}`)]);
      const after = await client.health();
      expect(after.ok).toBe(true);
      expect(after.workers.find((w) => w.address === a.address)!.status).toBe('unreachable');
    } finally {
      client.close();
      await a.stop(0);
      await b.stop(0);
    }
  });

  it('fails with ServiceUnavailableError when no worker answers', async () => {
    const gone = await startInferenceWorker({ models: [], address: '127.0.0.1:0', log });
    await gone.stop(0);
    const client = new InferenceClient({ addresses: [gone.address], log, retries: 2, backoffMs: 10, timeoutMs: 2_000 });
    try {
      await expect(client.embedText('chars', ['x'])).rejects.toBeInstanceOf(ServiceUnavailableError);
      expect((await client.health()).ok).toBe(false);
    } finally {
      client.close();
    }
    const none = new InferenceClient({ addresses: [], log });
    await expect(none.listModels()).rejects.toBeInstanceOf(ServiceUnavailableError);
    none.close();
  });
});
