import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';
import { EventBus } from '../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../support/kernel.js';

const REFUSED = 'a committed change stands, but its events could not be published';

/**
 * Every resource publishes its events after the change committed. With the bus refusing them (NATS
 * unreachable), each request still answers what happened, and the change is there to read.
 */
describe('changes whose events the bus refuses', () => {
  let t: TestKernel;
  let refused: Array<MockInstance<(...args: never[]) => Promise<void>>>;
  beforeAll(async () => {
    t = await startTestKernel();
    expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'refused' } })).status).toBe(201);
    const bus = t.kernel.services.get(EventBus);
    const unreachable = new Error('the event bus is unreachable');
    refused = [vi.spyOn(bus, 'publish').mockRejectedValue(unreachable), vi.spyOn(bus, 'publishMany').mockRejectedValue(unreachable)];
  });
  afterAll(async () => {
    for (const spy of refused) spy.mockRestore();
    await t.stop();
  });

  const api = (method: string, path: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, headers: { 'X-Namespace': 'refused' }, ...(body !== undefined ? { body } : {}) });
  const warnings = () => t.logs.filter((line) => line.includes(REFUSED)).length;

  it('answers success for namespaces, buckets, objects and collections, and keeps them', async () => {
    let before = warnings();
    const namespace = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'made-while-refused' } });
    expect(namespace.status).toBe(201);
    expect((await t.request('GET', '/v1/namespaces/made-while-refused', { key: t.adminKey })).status).toBe(200);
    expect(warnings()).toBe(before + 1);

    before = warnings();
    expect((await api('POST', '/v1/buckets', { bucket_name: 'b' })).status).toBe(201);
    const object = await api('POST', '/v1/buckets/b/objects', { key: 'k', blobs: [{ property: 'content', text: 'kept' }] });
    expect(object.status).toBe(201);
    expect((await api('PATCH', `/v1/buckets/b/objects/${object.body.object_id}`, { metadata: { edited: true } })).status).toBe(200);
    expect((await api('GET', `/v1/buckets/b/objects/${object.body.object_id}`)).body.metadata).toEqual({ edited: true });
    expect((await api('DELETE', `/v1/buckets/b/objects/${object.body.object_id}`)).status).toBe(200);
    expect((await api('GET', `/v1/buckets/b/objects/${object.body.object_id}`)).status).toBe(404);
    expect(warnings()).toBe(before + 4);

    const collection = await api('POST', '/v1/collections/create', {
      collection_name: 'c',
      feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
      source: { type: 'bucket', bucket_id: 'b' },
    });
    expect(collection.status).toBe(201);
    expect((await api('GET', '/v1/collections/c')).status).toBe(200);
  });

  it('answers success for users and keys, and revoked keys stop working at once', async () => {
    const email = 'refused@example.com';
    const path = `/v1/organizations/users/${encodeURIComponent(email)}`;
    expect((await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email } })).status).toBe(201);
    const created = await t.request('POST', `${path}/api-keys`, { key: t.adminKey, body: { name: 'k' } });
    expect(created.status).toBe(201);
    const secret = created.body.key as string;
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(200);

    const revoked = await t.request('DELETE', `${path}/api-keys/k?force=true`, { key: t.adminKey });
    expect(revoked.status).toBe(200);
    expect((await t.request('GET', '/v1/me', { key: secret })).status).toBe(401);

    const before = warnings();
    const second = await t.request('POST', `${path}/api-keys`, { key: t.adminKey, body: { name: 'k2' } });
    expect(second.status).toBe(201);
    expect((await t.request('GET', '/v1/me', { key: second.body.key })).status).toBe(200);
    const deleted = await t.request('DELETE', path, { key: t.adminKey });
    expect(deleted.status).toBe(200);
    expect((await t.request('GET', path, { key: t.adminKey })).status).toBe(404);
    // The user's keys went with it, here at once (the other processes' caches would drop them within their TTL).
    expect((await t.request('GET', '/v1/me', { key: second.body.key })).status).toBe(401);
    // The key's creation, then the user's deletion: its revoked key and the user in one hand-off.
    expect(warnings()).toBe(before + 2);
  });
});
