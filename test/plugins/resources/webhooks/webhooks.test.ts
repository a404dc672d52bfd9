/**
 * Webhooks through the real stack: CRUD and its checks, isolation between organizations, real events
 * delivered signed (Standard Webhooks) to a local receiver by background tasks, retries after a 5xx, none
 * after a 4xx, the test event, secret rotation, and the retriever alerts (slow query, low cache hit rate).
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../../../kernel/secret-box.js';
import { DatabaseHandle, TenantStore } from '../../../../kernel/tokens.js';
import { WEBHOOK_EVENT_TYPES } from '../../../../plugins/resources/webhooks/event-types.js';
import { generateSecret, signature } from '../../../../plugins/resources/webhooks/secrets.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { startReceiver, verifySignature, type Receiver } from './receiver.js';

const NS = 'hooks';
const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

type Delivery = { delivery_id: string; event_type: string; status: string; attempts: number; response_status: number | null; response_body: string | null; error: string | null; next_attempt_at: string | null; payload: { type: string; data: Record<string, unknown> } };

describe('webhook signatures', () => {
  it('match the Standard Webhooks test vector', () => {
    expect(signature(SECRET, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}')).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('lists the same event types as the OpenAPI document', async () => {
    const doc = JSON.parse(await readFile(new URL('../../../../generated/openapi.json', import.meta.url), 'utf8')) as {
      components: { schemas: { WebhookEventType: { enum: string[] } } };
    };
    expect([...doc.components.schemas.WebhookEventType.enum].sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
  });
});

describe('webhooks', () => {
  let t: TestKernel;
  let receiver: Receiver;
  let otherKey: string;

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const create = async (path: string, eventTypes: string[], extra: Record<string, unknown> = {}) => {
    const res = await api('POST', '/v1/organizations/webhooks', { url: receiver.url(path), secret: SECRET, event_types: eventTypes, ...extra });
    expect(res.status, res.text).toBe(201);
    return res.body as { webhook_id: string; secret_hint: string };
  };
  const deliveries = async (webhookId: string, query = ''): Promise<Delivery[]> => {
    const res = await api('GET', `/v1/organizations/webhooks/${webhookId}/deliveries${query}`);
    expect(res.status, res.text).toBe(200);
    return res.body.results as Delivery[];
  };
  /** The deliveries once `done` holds for them (polled: deliveries are written by background tasks). */
  const settled = async (webhookId: string, done: (rows: Delivery[]) => boolean): Promise<Delivery[]> => {
    let rows: Delivery[] = [];
    await expect.poll(async () => done((rows = await deliveries(webhookId))), { timeout: 30_000, interval: 25 }).toBe(true);
    return rows;
  };

  beforeAll(async () => {
    receiver = await startReceiver();
    // A local receiver needs loopback addresses; retries follow each other quickly.
    t = await startTestKernel({ config: { allowPrivateWebhookUrls: true, webhookRetryBaseMs: 20 } });
    otherKey = (await t.kernel.services.get(TenantStore).createOrganization({ name: 'other-org', ownerEmail: 'owner@other.test' })).adminKeyPlaintext;
    expect((await api('POST', '/v1/namespaces', { namespace_name: NS })).status).toBe(201);
    expect((await api('POST', '/v1/buckets', { bucket_name: 'inbox' })).status).toBe(201);
  });

  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  it('creates, reads, lists, updates and deletes a webhook, never showing its secret', async () => {
    const created = await create('/crud', ['object.created', 'extractor.failure'], { description: 'for crud' });
    expect(created).toMatchObject({ webhook_id: expect.stringMatching(/^whk_/), secret_hint: 'whsec_…LaSw', enabled: true, slow_query_threshold_ms: 1000, low_hit_rate_threshold: 0.5 });
    expect(JSON.stringify(created)).not.toContain(SECRET);

    const got = await api('GET', `/v1/organizations/webhooks/${created.webhook_id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(created);
    // At rest the secret is sealed: the database alone does not reveal it.
    const stored = await t.kernel.services.get(DatabaseHandle).db('webhooks').where({ webhook_id: created.webhook_id }).first();
    expect(stored.secret).toMatch(/^sealed1:/);
    expect(JSON.stringify(stored)).not.toContain(SECRET.slice('whsec_'.length));

    const second = await create('/crud-2', ['user.created']);
    const first = await api('GET', '/v1/organizations/webhooks?limit=1');
    expect(first.body.has_next).toBe(true);
    const rest = await api('GET', `/v1/organizations/webhooks?limit=100&cursor=${first.body.next_cursor}`);
    const listed = [...first.body.results, ...rest.body.results].map((w: { webhook_id: string }) => w.webhook_id);
    expect(listed).toEqual(expect.arrayContaining([created.webhook_id, second.webhook_id]));
    expect(JSON.stringify(rest.body)).not.toContain(SECRET);

    const patched = await api('PATCH', `/v1/organizations/webhooks/${created.webhook_id}`, { description: null, enabled: false, event_types: ['batch.failed'], slow_query_threshold_ms: 250 });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ description: null, enabled: false, event_types: ['batch.failed'], slow_query_threshold_ms: 250 });
    expect((await api('PATCH', `/v1/organizations/webhooks/${created.webhook_id}`, {})).status).toBe(400);

    expect((await api('DELETE', `/v1/organizations/webhooks/${created.webhook_id}`)).body).toEqual({ webhook_id: created.webhook_id, deleted: true });
    expect((await api('GET', `/v1/organizations/webhooks/${created.webhook_id}`)).status).toBe(404);
    expect((await api('DELETE', `/v1/organizations/webhooks/${created.webhook_id}`)).status).toBe(404);
    await api('DELETE', `/v1/organizations/webhooks/${second.webhook_id}`);
  });

  it('refuses bad secrets, URLs and event types with a 422 naming the field', async () => {
    const post = (body: Record<string, unknown>) => api('POST', '/v1/organizations/webhooks', { url: receiver.url('/bad'), secret: SECRET, event_types: ['object.created'], ...body });
    const locOf = (res: { body: { detail: Array<{ loc: unknown[] }> } }) => res.body.detail.map((d) => d.loc.join('.'));

    for (const secret of ['sk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_short', `whsec_${'!'.repeat(40)}`]) {
      const res = await post({ secret });
      expect(res.status, secret).toBe(422);
      expect(locOf(res).some((l) => l.startsWith('body.secret')), res.text).toBe(true);
    }
    for (const url of ['not a url', 'ftp://example.com/hook', 'https://user:pw@example.com/hook']) {
      const res = await post({ url });
      expect(res.status, url).toBe(422);
      expect(locOf(res), res.text).toContain('body.url');
    }
    const unknown = await post({ event_types: ['object.created', 'object.exploded'] });
    expect(unknown.status).toBe(422);
    expect(unknown.text).toContain('event_types');
    expect((await post({ event_types: [] })).status).toBe(422);
    expect((await post({ slow_query_threshold_ms: -1 })).status).toBe(422);
  });

  it('hides a webhook from another organization', async () => {
    const mine = await create('/mine', ['object.created']);
    const path = `/v1/organizations/webhooks/${mine.webhook_id}`;
    expect((await api('GET', path, undefined, otherKey)).status).toBe(404);
    expect((await api('PATCH', path, { enabled: false }, otherKey)).status).toBe(404);
    expect((await api('POST', `${path}/test`, undefined, otherKey)).status).toBe(404);
    expect((await api('POST', `${path}/rotate-secret`, {}, otherKey)).status).toBe(404);
    expect((await api('GET', `${path}/deliveries`, undefined, otherKey)).status).toBe(404);
    expect((await api('DELETE', path, undefined, otherKey)).status).toBe(404);
    const theirs = await api('GET', '/v1/organizations/webhooks', undefined, otherKey);
    expect(theirs.body.results).toEqual([]);
    expect((await api('GET', path)).body.enabled).toBe(true);
    await api('DELETE', path);
  });

  it('delivers a real event signed, and records the delivery', async () => {
    const hook = await create('/objects', ['object.created']);
    const object = await api('POST', '/v1/buckets/inbox/objects', { key: 'a.txt', blobs: [{ property: 'content', text: 'hello' }] });
    expect(object.status, object.text).toBe(201);

    const [request] = await receiver.waitFor('/objects', 1);
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['webhook-id']).toMatch(/^whd_/);
    expect(Math.abs(Number(request!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(300);
    expect(verifySignature(SECRET, request!)).toBe(true);
    expect(verifySignature(generateSecret(), request!)).toBe(false);
    const body = JSON.parse(request!.body);
    expect(body).toMatchObject({ id: expect.stringMatching(/^evt_/), type: 'object.created', organization_id: expect.any(String), data: { object_id: object.body.object_id, key: 'a.txt' } });
    expect(Number.isNaN(Date.parse(body.timestamp))).toBe(false);

    const [delivery] = await settled(hook.webhook_id, (rows) => rows[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ delivery_id: request!.headers['webhook-id'], event_type: 'object.created', attempts: 1, response_status: 200, response_body: 'ok', error: null, next_attempt_at: null });
    expect(delivery!.payload).toEqual(body);
  });

  it('retries after a 500 until the endpoint answers, sending the same message', async () => {
    receiver.script('/flaky', [500, 503]);
    const hook = await create('/flaky', ['user.created']);
    expect((await api('POST', '/v1/organizations/users', { email: 'flaky@example.test' })).status).toBe(201);

    const requests = await receiver.waitFor('/flaky', 3);
    expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1);
    expect(new Set(requests.map((r) => r.body)).size).toBe(1);
    expect(requests.every((r) => verifySignature(SECRET, r))).toBe(true);
    const [delivery] = await settled(hook.webhook_id, (rows) => rows[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ attempts: 3, response_status: 200, error: null });
  });

  it('does not retry a 400, and keeps only the start of the answer', async () => {
    receiver.script('/refusing', [400]);
    const hook = await create('/refusing', ['user.deleted']);
    expect((await api('POST', '/v1/organizations/users', { email: 'gone@example.test' })).status).toBe(201);
    expect((await api('DELETE', '/v1/organizations/users/gone@example.test')).status).toBe(200);

    const [delivery] = await settled(hook.webhook_id, (rows) => rows[0]?.status === 'failed');
    expect(delivery).toMatchObject({ attempts: 1, response_status: 400, next_attempt_at: null, error: 'answered HTTP 400' });
    expect(delivery!.response_body!.length).toBe(2048);
    expect(receiver.received('/refusing')).toHaveLength(1);
    expect(await deliveries(hook.webhook_id, '?status=succeeded')).toEqual([]);
  });

  it('sends a test event on request, whatever the webhook subscribes to', async () => {
    const hook = await create('/test-event', ['batch.completed'], { enabled: false });
    const res = await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/test`);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ status: 'pending', attempts: 0, event_type: 'webhook.test' });
    const [request] = await receiver.waitFor('/test-event', 1);
    expect(request!.headers['webhook-id']).toBe(res.body.delivery_id);
    expect(JSON.parse(request!.body)).toMatchObject({ type: 'webhook.test', data: { webhook_id: hook.webhook_id } });
    expect(verifySignature(SECRET, request!)).toBe(true);
  });

  it('signs with the old and the new secret for a while after a rotation', async () => {
    const hook = await create('/rotated', ['namespace.created']);
    const rotated = await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    const secret = rotated.body.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(rotated.body.secret_hint).toBe(`whsec_…${secret.slice(-4)}`);
    expect((await api('GET', `/v1/organizations/webhooks/${hook.webhook_id}`)).body.secret).toBeUndefined();

    expect((await api('POST', '/v1/namespaces', { namespace_name: 'rotation-check' })).status).toBe(201);
    const [request] = await receiver.waitFor('/rotated', 1);
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verifySignature(secret, request!)).toBe(true);
    expect(verifySignature(SECRET, request!)).toBe(true);
  });

  it('a secret sealed under another signing secret fails its deliveries saying so, and rotating mends it', async () => {
    const hook = await create('/resealed', ['namespace.created']);
    const foreign = new SecretBox(Buffer.from('another deployment'), 'webhook-secrets').seal(SECRET);
    await t.kernel.services.get(DatabaseHandle).db('webhooks').where({ webhook_id: hook.webhook_id }).update({ secret: foreign });
    expect((await api('GET', `/v1/organizations/webhooks/${hook.webhook_id}`)).status).toBe(200);
    const sent = await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/test`);
    const [failed] = await settled(hook.webhook_id, (rows) => rows.some((r) => r.delivery_id === sent.body.delivery_id && r.status === 'failed'));
    expect(failed).toMatchObject({ attempts: 1, response_status: null });
    expect(failed!.error).toContain('rotate it');
    expect(receiver.received('/resealed')).toHaveLength(0);

    const rotated = await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(200);
    expect((await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/test`)).status).toBe(202);
    const [request] = await receiver.waitFor('/resealed', 1);
    // Only the new secret signs: the unreadable one is not carried over.
    expect(String(request!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifySignature(rotated.body.secret, request!)).toBe(true);
  });

  describe('retriever alerts', () => {
    beforeAll(async () => {
      const collection = await api('POST', '/v1/collections/create', {
        collection_name: 'notes',
        source: { type: 'bucket', bucket_id: 'inbox' },
        feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }],
      });
      expect(collection.status, collection.text).toBe(201);
      const stages = [{ stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'topic', operator: 'eq', value: '{{inputs.q}}' }] } } } }];
      for (const [name, cache] of [['plain', false], ['cached', true]] as const) {
        const res = await api('POST', '/v1/retrievers', {
          retriever_name: name,
          collection_identifiers: ['notes'],
          input_schema: { q: { type: 'string' } },
          stages,
          ...(cache ? { cache_config: { enabled: true } } : {}),
        });
        expect(res.status, res.text).toBe(201);
      }
    });

    it('announces a saved execution slower than the webhook threshold', async () => {
      const hook = await create('/slow', ['retriever.slow_query'], { slow_query_threshold_ms: 0 });
      const run = await api('POST', '/v1/retrievers/plain/execute', { inputs: { q: 'lamps' } });
      expect(run.status, run.text).toBe(200);
      const [request] = await receiver.waitFor('/slow', 1);
      expect(JSON.parse(request!.body)).toMatchObject({
        type: 'retriever.slow_query',
        data: { retriever_name: 'plain', execution_id: run.body.execution_id, duration_ms: expect.any(Number), status: expect.any(String) },
      });
      await settled(hook.webhook_id, (rows) => rows.length === 1 && rows[0]!.status === 'succeeded');
    });

    it('announces a low cache hit rate once, not on every execution', async () => {
      const hook = await create('/hit-rate', ['cache.low_hit_rate'], { low_hit_rate_threshold: 0.5 });
      // Every input differs: every execution misses the cache.
      for (let i = 0; i < 14; i++) expect((await api('POST', '/v1/retrievers/cached/execute', { inputs: { q: `topic-${i}` } })).status).toBe(200);
      const [request] = await receiver.waitFor('/hit-rate', 1);
      expect(JSON.parse(request!.body)).toMatchObject({ type: 'cache.low_hit_rate', data: { retriever_name: 'cached', hit_rate: 0, hits: 0 } });
      for (let i = 0; i < 12; i++) expect((await api('POST', '/v1/retrievers/cached/execute', { inputs: { q: `again-${i}` } })).status).toBe(200);
      // A test event after the executions: once it has arrived, anything the executions caused has been queued before it.
      await api('POST', `/v1/organizations/webhooks/${hook.webhook_id}/test`);
      const rows = await settled(hook.webhook_id, (all) => all.some((d) => d.event_type === 'webhook.test' && d.status === 'succeeded'));
      expect(rows.filter((d) => d.event_type === 'cache.low_hit_rate')).toHaveLength(1);
    });
  });
});

describe('webhooks without private addresses allowed', () => {
  let t: TestKernel;
  beforeAll(async () => {
    t = await startTestKernel({ config: { allowPrivateWebhookUrls: false } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses loopback and private URLs', async () => {
    for (const url of ['http://127.0.0.1:9/hook', 'http://localhost/hook', 'https://10.1.2.3/hook', 'http://[::1]/hook', 'http://169.254.169.254/latest']) {
      const res = await t.request('POST', '/v1/organizations/webhooks', { key: t.adminKey, body: { url, secret: SECRET, event_types: ['object.created'] } });
      expect(res.status, url).toBe(422);
      expect(res.body.detail[0]).toMatchObject({ loc: ['body', 'url'], type: 'value_error.url.private_address' });
    }
    const ok = await t.request('POST', '/v1/organizations/webhooks', { key: t.adminKey, body: { url: 'https://hooks.example.com/x', secret: SECRET, event_types: ['object.created'] } });
    expect(ok.status, ok.text).toBe(201);
  });
});
