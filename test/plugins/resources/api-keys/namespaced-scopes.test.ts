/**
 * Bucket and collection names repeat across namespaces, so a scope names one by id or by
 * `namespace/name`: a key scoped to `team_a/shared` neither reads nor changes `shared` in team_b.
 * A bare name is confined to the key's namespace scopes, and refused (422) on a key without one.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../../../generated/openapi.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

type ResourceScope = components['schemas']['ResourceScope'];

let t: TestKernel;
const bucketIds: Record<string, string> = {};

const keysPath = () => `/v1/organizations/users/${encodeURIComponent(t.adminEmail)}/api-keys`;
let keyCount = 0;

async function createKey(scopes: ResourceScope[]): Promise<string> {
  const res = await t.request('POST', keysPath(), { key: t.adminKey, body: { name: `ns-scoped-${keyCount++}`, scopes } });
  expect(res.status).toBe(201);
  return res.body.key as string;
}

const as = (key: string, namespace: string) => ({
  bucket: (method: string, body?: unknown) =>
    t.request(method, '/v1/buckets/shared', { key, headers: { 'X-Namespace': namespace }, ...(body ? { body } : {}) }),
  collection: (method: string, body?: unknown) =>
    t.request(method, '/v1/collections/shared', { key, headers: { 'X-Namespace': namespace }, ...(body ? { body } : {}) }),
});

beforeAll(async () => {
  t = await startTestKernel();
  for (const ns of ['team_a', 'team_b']) {
    expect((await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: ns } })).status).toBe(201);
    const headers = { 'X-Namespace': ns };
    const bucket = await t.request('POST', '/v1/buckets', { key: t.adminKey, headers, body: { bucket_name: 'shared' } });
    expect(bucket.status).toBe(201);
    bucketIds[ns] = bucket.body.bucket_id;
    const collection = await t.request('POST', '/v1/collections/create', {
      key: t.adminKey,
      headers,
      body: { collection_name: 'shared', source: { type: 'bucket', bucket_id: 'shared' }, feature_extractors: [{ feature_extractor_name: 'passthrough_extractor' }] },
    });
    expect(collection.status).toBe(201);
  }
});

afterAll(async () => {
  await t?.stop();
});

describe('a key scoped to bucket and collection team_a/shared', () => {
  let key: string;
  beforeAll(async () => {
    key = await createKey([
      { resource_type: 'bucket', resource_id: 'team_a/shared' },
      { resource_type: 'collection', resource_id: 'team_a/shared' },
    ]);
  });

  it('reads and updates shared in team_a', async () => {
    expect((await as(key, 'team_a').bucket('GET')).status).toBe(200);
    expect((await as(key, 'team_a').bucket('PATCH', { description: 'mine' })).status).toBe(200);
    expect((await as(key, 'team_a').collection('GET')).status).toBe(200);
    expect((await as(key, 'team_a').collection('PATCH', { description: 'mine' })).status).toBe(200);
  });

  it('neither reads nor updates shared in team_b (bucket and collection, GET and PATCH)', async () => {
    const other = as(key, 'team_b');
    for (const res of [
      await other.bucket('GET'),
      await other.bucket('PATCH', { description: 'not yours' }),
      await other.collection('GET'),
      await other.collection('PATCH', { description: 'not yours' }),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error.type).toBe('NotAllowedError');
    }
    expect((await as(t.adminKey, 'team_b').bucket('GET')).body.description).toBeNull();
    expect((await as(t.adminKey, 'team_b').collection('GET')).body.description).toBeNull();
  });
});

describe('wildcards and ids', () => {
  it('*/shared means every namespace, on purpose', async () => {
    const key = await createKey([{ resource_type: 'bucket', resource_id: '*/shared' }]);
    expect((await as(key, 'team_a').bucket('GET')).status).toBe(200);
    expect((await as(key, 'team_b').bucket('GET')).status).toBe(200);
  });

  it('a prefix pattern in the namespace part covers the namespaces it matches, by name or ns_ id', async () => {
    const key = await createKey([{ resource_type: 'collection', resource_id: 'team_*/shared' }]);
    expect((await as(key, 'team_a').collection('GET')).status).toBe(200);
    expect((await as(key, 'team_b').collection('GET')).status).toBe(200);
    const nsB = (await t.request('GET', '/v1/namespaces/team_b', { key: t.adminKey })).body.namespace_id as string;
    const byId = await createKey([{ resource_type: 'bucket', resource_id: `${nsB}/sha*` }]);
    expect((await as(byId, 'team_b').bucket('GET')).status).toBe(200);
    expect((await as(byId, 'team_a').bucket('GET')).status).toBe(403);
  });

  it('team_a/* covers every bucket in team_a and none in team_b', async () => {
    const key = await createKey([{ resource_type: 'bucket', resource_id: 'team_a/*' }]);
    expect((await as(key, 'team_a').bucket('GET')).status).toBe(200);
    expect((await as(key, 'team_b').bucket('GET')).status).toBe(403);
  });

  it('a bkt_ id covers that one bucket only', async () => {
    const key = await createKey([{ resource_type: 'bucket', resource_id: bucketIds.team_b! }]);
    expect((await as(key, 'team_b').bucket('GET')).status).toBe(200);
    expect((await as(key, 'team_a').bucket('GET')).status).toBe(403);
  });
});

describe('bare names', () => {
  it('are refused (422) on a key without a namespace scope, at create and at update', async () => {
    const res = await t.request('POST', keysPath(), {
      key: t.adminKey,
      body: { name: 'bare-name', scopes: [{ resource_type: 'bucket', resource_id: 'shared' }] },
    });
    expect(res.status).toBe(422);
    expect(res.body.detail[0]).toMatchObject({ loc: ['body', 'scopes', 0, 'resource_id'], type: 'scope_resource_id' });
    expect(res.body.detail[0].msg).toMatch(/namespace\/shared/);

    await createKey([{ resource_type: 'bucket', resource_id: 'team_a/shared' }]);
    const name = `ns-scoped-${keyCount - 1}`;
    const patched = await t.request('PATCH', `${keysPath()}/${name}`, {
      key: t.adminKey,
      body: { scopes: [{ resource_type: 'collection', resource_id: 'shared' }] },
    });
    expect(patched.status).toBe(422);
  });

  it('refuse a "/" on resource types that are not namespaced', async () => {
    const res = await t.request('POST', keysPath(), {
      key: t.adminKey,
      body: { name: 'slashed-namespace', scopes: [{ resource_type: 'namespace', resource_id: 'team_a/x' }] },
    });
    expect(res.status).toBe(422);
  });

  it('match only inside the namespaces the key\'s namespace scopes cover', async () => {
    const key = await createKey([
      { resource_type: 'namespace', resource_id: 'team_a', operations: ['read_data'] },
      { resource_type: 'bucket', resource_id: 'shared', operations: ['read_data', 'write_data'] },
    ]);
    expect((await as(key, 'team_a').bucket('PATCH', { description: 'bare but confined' })).status).toBe(200);
    expect((await as(key, 'team_b').bucket('GET')).status).toBe(403);
    expect((await as(key, 'team_b').bucket('PATCH', { description: 'no' })).status).toBe(403);
  });
});
