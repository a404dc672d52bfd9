import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TesseraEvent } from '../../../../kernel/events/event-bus.js';
import { EventBus } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('object and upload events', () => {
  let t: TestKernel;
  const seen: TesseraEvent[] = [];
  beforeAll(async () => {
    t = await startTestKernel();
    const bus = t.kernel.services.get(EventBus);
    bus.subscribe('object.*', (e) => void seen.push(e));
    bus.subscribe('upload.completed', (e) => void seen.push(e));
    await t.client().POST('/v1/namespaces', { body: { namespace_name: 'events' } });
    await t.request('POST', '/v1/buckets', { key: t.adminKey, headers: { 'X-Namespace': 'events' }, body: { bucket_name: 'b' } });
  });
  afterAll(async () => {
    await t.stop();
  });

  const api = (method: string, path: string, body?: unknown) =>
    t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': 'events' }, ...(body !== undefined ? { body } : {}) });

  async function waitFor(type: string, id: string): Promise<TesseraEvent> {
    for (let i = 0; i < 200; i++) {
      const found = seen.find((e) => e.type === type && Object.values(e.data).includes(id));
      if (found) return found;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`no ${type} event for ${id}`);
  }

  it('publishes object.created, upload.completed and object.deleted with the organization and ids', async () => {
    const created = await api('POST', '/v1/buckets/b/objects', { blobs: [{ property: 'content', text: 'x' }] });
    const event = await waitFor('object.created', created.body.object_id);
    expect(event.organization_id).toMatch(/^org_/);
    expect(event.data).toMatchObject({ bucket_id: created.body.bucket_id, key: created.body.key });

    const upload = (await api('POST', '/v1/buckets/b/uploads', { filename: 'u.txt' })).body;
    await fetch(upload.presigned_url, { method: 'PUT', body: 'uploaded' });
    const confirmed = await api('POST', `/v1/buckets/b/uploads/${upload.upload_id}/confirm`, {});
    expect((await waitFor('upload.completed', upload.upload_id)).data.object_id).toBe(confirmed.body.object_id);

    await api('DELETE', `/v1/buckets/b/objects/${created.body.object_id}`);
    await waitFor('object.deleted', created.body.object_id);
  });
});
