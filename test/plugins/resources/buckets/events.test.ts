import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { TesseraEvent } from '../../../../kernel/events/event-bus.js';
import { EventBus } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const REFUSED = 'a committed change stands, but its events could not be published';

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

  it('announces a bulk request\'s objects once each, in request order', async () => {
    const created = await api('POST', '/v1/buckets/b/objects/bulk', {
      objects: Array.from({ length: 40 }, (_, i) => ({ key: `bulk/${i}`, blobs: [{ property: 'content', text: `text ${i}` }] })),
    });
    expect(created.status).toBe(201);
    const ids: string[] = created.body.results.map((o: { object_id: string }) => o.object_id);
    await waitFor('object.created', ids[ids.length - 1]!);
    const announced = seen.filter((e) => e.type === 'object.created' && ids.includes(e.data.object_id as string)).map((e) => e.data.object_id);
    expect(announced).toEqual(ids);
  });

  it('keeps committed objects and their blobs when the bus refuses their events', async () => {
    const bus = t.kernel.services.get(EventBus);
    const refused = [vi.spyOn(bus, 'publish'), vi.spyOn(bus, 'publishMany')].map((spy) => spy.mockRejectedValue(new Error('the event bus is unreachable')));
    try {
      const one = await api('POST', '/v1/buckets/b/objects', { key: 'refused/one', blobs: [{ property: 'content', base64: Buffer.from('binary \u0000 blob').toString('base64') }] });
      const many = await api('POST', '/v1/buckets/b/objects/bulk', {
        objects: [{ key: 'refused/a', blobs: [{ property: 'content', base64: Buffer.from('\u0000a').toString('base64') }] }, { key: 'refused/b' }],
      });
      expect([one.status, many.status]).toEqual([201, 201]);
      // The single object as one event, the bulk request's two as one hand-off.
      expect(refused.map((spy) => spy.mock.calls.length)).toEqual([1, 1]);
      for (const object of [one.body, many.body.results[0]]) {
        const read = await api('GET', `/v1/buckets/b/objects/${object.object_id}`);
        expect(read.status).toBe(200);
        expect((await fetch(read.body.blobs[0].url)).status).toBe(200);
      }
      expect(t.logs.filter((line) => line.includes(REFUSED))).toHaveLength(2);
    } finally {
      for (const spy of refused) spy.mockRestore();
    }
  });

  it('completes a confirmed upload when the bus refuses its event', async () => {
    const bus = t.kernel.services.get(EventBus);
    const refused = vi.spyOn(bus, 'publish').mockRejectedValue(new Error('the event bus is unreachable'));
    try {
      const upload = (await api('POST', '/v1/buckets/b/uploads', { filename: 'refused.txt' })).body;
      await fetch(upload.presigned_url, { method: 'PUT', body: 'uploaded while the bus is down' });
      const confirmed = await api('POST', `/v1/buckets/b/uploads/${upload.upload_id}/confirm`, {});
      expect(confirmed.status).toBe(200);
      expect(confirmed.body.status).toBe('COMPLETED');
      expect((await api('GET', `/v1/buckets/b/objects/${confirmed.body.object_id}`)).status).toBe(200);
      expect(refused).toHaveBeenCalled();
      expect(t.logs.some((line) => line.includes(REFUSED) && line.includes('upload.completed'))).toBe(true);
    } finally {
      refused.mockRestore();
    }
  });
});
