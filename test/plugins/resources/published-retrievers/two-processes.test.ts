/**
 * Two API processes on one PostgreSQL database (PGlite serves one process only, so this runs on the
 * PostgreSQL backend): a publication made through one answers through the other, with the same prk_ key,
 * and stops answering there the moment the first unpublishes it.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { startPublishedFixture, type PublishedFixture } from './setup.js';

const signingSecret = randomBytes(32).toString('hex');

describe.skipIf(!process.env.TEST_DATABASE_URL)('published retrievers across two API processes', () => {
  let f: PublishedFixture;
  let second: TestKernel;

  beforeAll(async () => {
    f = await startPublishedFixture({ signingSecret });
    second = await startTestKernel({
      config: { runTasks: false, databaseUrl: f.t.config.databaseUrl, adminKey: f.t.adminKey, adminEmail: f.t.adminEmail, signingSecret },
    });
    await f.retriever('shared');
  }, 120_000);
  afterAll(async () => {
    await second?.stop();
    await f?.t.stop();
  });

  it('answers through the other process at once, and stops there at once', async () => {
    const published = await f.api('POST', '/v1/retrievers/shared/publish', { public_name: 'shared-lamps', display_config: { exposed_fields: ['title'] } });
    expect(published.status, published.text).toBe(201);
    const there = await second.request('POST', '/v1/public/retrievers/shared-lamps/execute', { body: { inputs: { n: 1 } } });
    expect(there.status, there.text).toBe(200);
    expect(there.body.documents).toHaveLength(2);
    const config = await second.request('GET', '/v1/marketplace/catalog/shared-lamps/config');
    expect(config.body.public_api_key).toBe(published.body.public_api_key);
    expect((await f.api('DELETE', '/v1/retrievers/shared/publish')).status).toBe(200);
    expect((await second.request('POST', '/v1/public/retrievers/shared-lamps/execute', { body: { inputs: { n: 1 } } })).status).toBe(404);
  });
});
