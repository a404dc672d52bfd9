import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import type { RawResponse } from '../../../support/kernel.js';
import { SECRET_NOTE, startPublishedFixture, type PublishedFixture } from './setup.js';

const PASSWORD = 'open sesame 42';
const EXPOSED = { title: 'Lamps', description: 'Lamps for every room', exposed_fields: ['title', 'price'] };

describe('public retriever endpoints', () => {
  let f: PublishedFixture;
  /** Every public response, scanned for secrets at the end (the leak test). */
  const seen: Array<{ what: string; response: RawResponse; allowPublicKey: boolean }> = [];
  let openKey = '';
  let lockedKey = '';

  const pub = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}, allowPublicKey = false) => {
    const response = await f.anon(method, path, body, headers);
    seen.push({ what: `${method} ${path}`, response, allowPublicKey });
    return response;
  };

  beforeAll(async () => {
    f = await startPublishedFixture();
    await f.retriever('open');
    await f.retriever('locked');
    await f.retriever('limited');
    await f.retriever('hidden');
    const open = await f.api('POST', '/v1/retrievers/open/publish', { public_name: 'open-lamps', display_config: EXPOSED, marketplace_listed: true });
    openKey = open.body.public_api_key;
    const locked = await f.api('POST', '/v1/retrievers/locked/publish', {
      public_name: 'locked-lamps', title: 'Secret Lamps', display_config: EXPOSED, password: PASSWORD,
    });
    lockedKey = locked.body.public_api_key;
    await f.api('POST', '/v1/retrievers/limited/publish', { public_name: 'limited-lamps', display_config: EXPOSED, rate_limits: { per_minute: 2 } });
    await f.api('POST', '/v1/retrievers/hidden/publish', { public_name: 'hidden-lamps', display_config: EXPOSED, active: false });
    for (const r of [open, locked]) f.secrets.add(r.body.namespace_id);
    f.secrets.add(PASSWORD);
    f.secrets.add(lockedKey);
    f.secrets.add(openKey);
    const pubIds = await f.t.kernel.services.get(DatabaseHandle).db('published_retrievers').select('publication_id', 'api_key_hash', 'api_key_sealed', 'password_hash');
    for (const row of pubIds) for (const v of Object.values(row)) if (typeof v === 'string') f.secrets.add(v);
  }, 120_000);
  afterAll(async () => {
    await f?.t.stop();
  });

  it('executes with only the exposed fields, an execution id, and records it in the owner history', async () => {
    const r = await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 2 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.execution_id).toMatch(/^exec_/);
    expect(r.body.status).toBe('completed');
    expect(r.body.documents).toHaveLength(3);
    for (const d of r.body.documents) {
      expect(Object.keys(d).sort()).toEqual(expect.arrayContaining(['document_id', 'payload']));
      expect(Object.keys(d).every((k) => ['document_id', 'score', 'payload'].includes(k))).toBe(true);
      expect(Object.keys(d.payload).sort()).toEqual(['price', 'title']);
    }
    const history = await f.api('GET', '/v1/retrievers/open/executions');
    expect(history.body.results.map((e: { execution_id: string }) => e.execution_id)).toContain(r.body.execution_id);
    expect(history.body.results[0].created_by).toBe('public:open-lamps');
  });

  it('accepts the bodies search widgets send: pagination, settings.limit, return_presigned_urls', async () => {
    const limited = await pub('POST', '/v1/public/retrievers/open-lamps/execute?return_presigned_urls=false', { inputs: { n: 5 }, settings: { limit: 2 } });
    expect(limited.status, limited.text).toBe(200);
    expect(limited.body.documents).toHaveLength(2);
    expect(limited.body.pagination).toMatchObject({ total: 6, limit: 2, has_next: true });
    const paged = await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 5 }, pagination: { method: 'page_number', page_number: 2, page_size: 4 } });
    expect(paged.body.documents).toHaveLength(2);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 1 }, return_vectors: true })).status).toBe(422);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: {} })).status).toBe(422);
  });

  it('gives exposed stored blobs a fresh download URL but never their storage key', async () => {
    await f.retriever('pictures');
    await f.api('POST', '/v1/retrievers/pictures/publish', { public_name: 'lamp-pictures', display_config: { exposed_fields: ['title', 'image'] } });
    const r = await pub('POST', '/v1/public/retrievers/lamp-pictures/execute', { inputs: { n: 0 } });
    expect(r.status, r.text).toBe(200);
    const image = r.body.documents[0].payload.image;
    expect(image).toMatchObject({ content_type: 'image/png', filename: 'lamp-0.png', url: expect.stringContaining('/v1/storage/blobs/') });
    expect(image.storage_key).toBeUndefined();
    const plain = await pub('POST', '/v1/public/retrievers/lamp-pictures/execute?return_presigned_urls=false', { inputs: { n: 0 } });
    expect(plain.body.documents[0].payload.image.url).toBeUndefined();
  });

  it('streams Server-Sent Events carrying only the exposed fields', async () => {
    const r = await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 1 }, stream: true });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = r.text.split('\n\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const done = JSON.parse(events.at(-2)!);
    expect(done.event_type).toBe('execution_complete');
    expect(done.documents.map((d: { payload: object }) => Object.keys(d.payload).sort())).toEqual([['price', 'title'], ['price', 'title']]);
    expect(events.slice(0, -2).map((e) => JSON.parse(e).stage_name)).toEqual(events.slice(0, -2).map(() => undefined));
  });

  it('answers search widgets on other sites (CORS), never Origin: null', async () => {
    const r = await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 0 } }, { Origin: 'https://shop.example.com' });
    expect(r.status).toBe(200);
    expect(r.headers.get('access-control-allow-origin')).toBe('https://shop.example.com');
    const refused = await pub('POST', '/v1/public/retrievers/nobody-here/execute', { inputs: { n: 0 } }, { Origin: 'https://shop.example.com' });
    expect(refused.status).toBe(404);
    expect(refused.headers.get('access-control-allow-origin')).toBe('https://shop.example.com');
    const sandboxed = await pub('GET', '/v1/public/retrievers', undefined, { Origin: 'null' });
    expect(sandboxed.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('takes no key or its own prk_ key, and refuses any other key (401)', async () => {
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 0 } }, { 'X-Public-API-Key': openKey })).status).toBe(200);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 0 } }, { 'X-Public-API-Key': lockedKey })).status).toBe(401);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 0 } }, { 'X-Public-API-Key': 'prk_nope' })).status).toBe(401);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 0 } }, { 'X-Public-API-Key': f.t.adminKey })).status).toBe(401);
  });

  it('password flows: execute needs it (401 missing, 403 wrong), verify hands out the key, which stands in for it', async () => {
    expect((await pub('POST', '/v1/public/retrievers/locked-lamps/execute', { inputs: { n: 0 } })).status).toBe(401);
    expect((await pub('POST', '/v1/public/retrievers/locked-lamps/execute', { inputs: { n: 0 } }, { 'X-Retriever-Password': 'wrong one' })).status).toBe(403);
    const ok = await pub('POST', '/v1/public/retrievers/locked-lamps/execute', { inputs: { n: 0 } }, { 'X-Retriever-Password': PASSWORD });
    expect(ok.status, ok.text).toBe(200);
    const wrong = await pub('POST', '/v1/public/retrievers/locked-lamps/verify', { password: 'wrong one' });
    expect(wrong.status).toBe(200);
    expect(wrong.body).toEqual({ valid: false, public_api_key: null });
    const right = await pub('POST', '/v1/public/retrievers/locked-lamps/verify', { password: PASSWORD }, {}, true);
    expect(right.body).toEqual({ valid: true, public_api_key: lockedKey });
    expect((await pub('POST', '/v1/public/retrievers/locked-lamps/execute', { inputs: { n: 0 } }, { 'X-Public-API-Key': lockedKey })).status).toBe(200);
    // Config: password protection shown, the key withheld.
    const config = await pub('GET', '/v1/public/retrievers/locked-lamps/config');
    expect(config.body).toMatchObject({ password_protected: true, public_api_key: null, title: 'Secret Lamps' });
    // Interactions never need the password.
    const clicked = await pub('POST', '/v1/public/retrievers/locked-lamps/interactions', { document_id: ok.body.documents[0].document_id, interaction_type: ['CLICK'] });
    expect(clicked.status, clicked.text).toBe(200);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/verify', { password: PASSWORD })).body).toEqual({ valid: false, public_api_key: null });
  });

  it('slows brute force: wrong passwords from one address are a 429 past the limit, even the right one', async () => {
    await f.retriever('guarded');
    await f.api('POST', '/v1/retrievers/guarded/publish', { public_name: 'guarded-lamps', password: PASSWORD });
    for (let i = 0; i < 10; i++) expect((await pub('POST', '/v1/public/retrievers/guarded-lamps/verify', { password: `guess ${i}` })).body.valid).toBe(false);
    const blocked = await pub('POST', '/v1/public/retrievers/guarded-lamps/verify', { password: PASSWORD });
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await pub('POST', '/v1/public/retrievers/guarded-lamps/execute', { inputs: { n: 0 } }, { 'X-Retriever-Password': PASSWORD })).status).toBe(429);
  });

  it('config (deprecated, with Deprecation and Link) and the marketplace catalog config answer the same body', async () => {
    const old = await pub('GET', '/v1/public/retrievers/open-lamps/config', undefined, {}, true);
    expect(old.status).toBe(200);
    expect(old.headers.get('deprecation')).toBe('true');
    expect(old.headers.get('link')).toBe('</v1/marketplace/catalog/open-lamps/config>; rel="successor-version"');
    const successor = await pub('GET', '/v1/marketplace/catalog/open-lamps/config', undefined, {}, true);
    expect(successor.body).toEqual(old.body);
    expect(old.body).toEqual({ public_name: 'open-lamps', title: 'Lamps', description: 'Lamps for every room', display_config: EXPOSED, password_protected: false, public_api_key: openKey });
  });

  it('records interactions (all ten types, batches of up to 100, X-Session-ID) in the owner signals', async () => {
    const run = await pub('POST', '/v1/public/retrievers/open-lamps/execute', { inputs: { n: 3 } });
    const types = ['VIEW', 'CLICK', 'POSITIVE_FEEDBACK', 'NEGATIVE_FEEDBACK', 'PURCHASE', 'ADD_TO_CART', 'WISHLIST', 'LONG_VIEW', 'SHARE', 'BOOKMARK'];
    const batch = types.map((t, position) => ({ document_id: run.body.documents[0].document_id, interaction_type: [t], position, execution_id: run.body.execution_id }));
    const recorded = await pub('POST', '/v1/public/retrievers/open-lamps/interactions/batch', { interactions: batch }, { 'X-Session-ID': 'visitor-session-1' });
    expect(recorded.status, recorded.text).toBe(200);
    expect(recorded.body.recorded).toBe(10);
    const rows = await f.t.kernel.services.get(DatabaseHandle).db('retriever_interactions').where({ session_id: 'visitor-session-1' });
    expect(rows).toHaveLength(10);
    expect(rows.every((r: { execution_id: string }) => r.execution_id === run.body.execution_id)).toBe(true);
    const tooMany = Array.from({ length: 101 }, () => batch[0]);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/interactions/batch', { interactions: tooMany })).status).toBe(422);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/interactions', { document_id: 'd', interaction_type: ['STARE'] })).status).toBe(422);
    // An execution of another retriever is not found here.
    const other = await pub('POST', '/v1/public/retrievers/locked-lamps/execute', { inputs: { n: 0 } }, { 'X-Retriever-Password': PASSWORD });
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/interactions', { document_id: 'd', interaction_type: ['CLICK'], execution_id: other.body.execution_id })).status).toBe(404);
    // A visitor's click tied to an execution is on one of its results.
    const unseen = await pub('POST', '/v1/public/retrievers/open-lamps/interactions', { document_id: 'doc_never_shown', interaction_type: ['CLICK'], execution_id: run.body.execution_id });
    expect(unseen.status, unseen.text).toBe(400);
    expect(unseen.body.error.message).toContain("Document 'doc_never_shown' is not among the results of execution");
    const all = JSON.stringify(await f.t.kernel.services.get(DatabaseHandle).db('retriever_interactions'));
    expect(all).not.toContain(PASSWORD);
  });

  it('lists public retrievers with pages, statistics and a case-insensitive regex search', async () => {
    const list = await pub('GET', '/v1/public/retrievers?page_size=2');
    expect(list.status, list.text).toBe(200);
    expect(list.body).toMatchObject({ page: 1, page_size: 2, total_count: 5, total_pages: 3 });
    expect(list.body.statistics).toEqual({ total_active: 5, password_protected: 2, open: 3 });
    expect(list.body.results).toHaveLength(2);
    const slash = await pub('GET', '/v1/public/retrievers/');
    expect(slash.status).toBe(200);
    expect(slash.body.total_count).toBe(5);
    const all = await pub('GET', '/v1/public/retrievers?include_inactive=true');
    expect(all.body.total_count).toBe(6);
    expect(all.body.statistics.total_active).toBe(5);
    const searched = await pub('GET', `/v1/public/retrievers?search=${encodeURIComponent('^secret l')}`);
    expect(searched.body.results.map((r: { public_name: string }) => r.public_name)).toEqual(['locked-lamps']);
    const byDescription = await pub('GET', `/v1/public/retrievers?search=${encodeURIComponent('EVERY\\s+ROOM')}`);
    expect(byDescription.body.total_count).toBe(3);
    const started = Date.now();
    const pathological = await pub('GET', `/v1/public/retrievers?search=${encodeURIComponent('^(a+)+$|(x|x)*qz|(.*a){20}!')}`);
    expect(pathological.status, pathological.text).toBe(200);
    expect(pathological.body.total_count).toBe(0);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect((await pub('GET', `/v1/public/retrievers?search=${encodeURIComponent('(a)\\1')}`)).status).toBe(400);
    expect((await pub('GET', `/v1/public/retrievers?search=${'a'.repeat(201)}`)).status).toBe(422);
    // Compiling this pattern held PostgreSQL's one regex compiler for ~11 s: refused before it gets there.
    const slow = await pub('GET', `/v1/public/retrievers?search=${encodeURIComponent('(.?.?.?){0,250}q')}`);
    expect(slow.status, slow.text).toBe(400);
    expect(slow.body.error.message).toContain('too many optional parts');
    // An empty search lists everything.
    const everything = await pub('GET', '/v1/public/retrievers?search=');
    expect(everything.status, everything.text).toBe(200);
    expect(everything.body.total_count).toBe(5);
    // page_size: the schema's 1000 is accepted, the prose's 100 is what a page holds.
    const wide = await pub('GET', '/v1/public/retrievers?page_size=1000');
    expect(wide.status, wide.text).toBe(200);
    expect(wide.body).toMatchObject({ page_size: 100, total_count: 5, total_pages: 1 });
    expect(wide.body.results).toHaveLength(5);
    expect((await pub('GET', '/v1/public/retrievers?page_size=1001')).status).toBe(422);
    expect((await pub('GET', '/v1/public/retrievers?page_size=0')).status).toBe(422);
    expect((await pub('GET', '/v1/public/retrievers?page=501')).status).toBe(422);
  });

  it('gives the template without ids, keys or collections', async () => {
    const template = await pub('GET', '/v1/public/retrievers/open-lamps/template');
    expect(template.status, template.text).toBe(200);
    expect(template.body).toMatchObject({ template_name: 'open-lamps', collection_count: 1, input_schema: { n: { type: 'number', required: true } } });
    expect(template.body.stages[0]).toMatchObject({ stage_name: 'filter', stage_id: 'attribute_filter' });
    expect((await pub('GET', '/v1/public/retrievers/locked-lamps/template')).status).toBe(401);
    expect((await pub('GET', '/v1/public/retrievers/locked-lamps/template', undefined, { 'X-Retriever-Password': PASSWORD })).status).toBe(200);
    expect((await pub('GET', '/v1/public/retrievers/locked-lamps/template', undefined, { 'X-Public-API-Key': lockedKey })).status).toBe(200);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/interactions', { document_id: 'd', interaction_type: ['VIEW'] }, { 'X-Public-API-Key': lockedKey })).status).toBe(401);
    expect((await pub('POST', '/v1/public/retrievers/open-lamps/interactions', { document_id: 'd', interaction_type: ['VIEW'] }, { 'X-Public-API-Key': openKey })).status).toBe(200);
  });

  it('a failed execution: status failed with a readable error that names nothing internal (rule 8)', async () => {
    const created = await f.api('POST', '/v1/retrievers', {
      retriever_name: 'broken',
      collection_identifiers: ['things'],
      input_schema: { n: { type: 'number', required: true } },
      stages: [
        { stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'lte', value: '{{inputs.n}}' }] } } } },
        { stage_name: 'reshape', config: { stage_id: 'json_transform', parameters: { template: '{{ doc.fields.title }}' } } },
      ],
    });
    expect(created.status, created.text).toBe(201);
    f.secrets.add(created.body.retriever.retriever_id);
    await f.api('POST', '/v1/retrievers/broken/publish', { public_name: 'broken-lamps', display_config: EXPOSED });
    const r = await pub('POST', '/v1/public/retrievers/broken-lamps/execute', { inputs: { n: 1 } });
    expect(r.status, r.text).toBe(200);
    expect(r.body.status).toBe('failed');
    expect(r.body.error).toMatch(/could not be completed .*execution history/);
    expect(r.body.error).not.toMatch(/reshape|json_transform/);
    const owner = await f.api('GET', `/v1/retrievers/broken/executions/${r.body.execution_id}`);
    expect(owner.body.error).toMatch(/reshape/);
  });

  it('answers 429 with Retry-After past the per-retriever limit', async () => {
    expect((await pub('POST', '/v1/public/retrievers/limited-lamps/execute', { inputs: { n: 0 } })).status).toBe(200);
    expect((await pub('POST', '/v1/public/retrievers/limited-lamps/execute', { inputs: { n: 0 } })).status).toBe(200);
    const third = await pub('POST', '/v1/public/retrievers/limited-lamps/execute', { inputs: { n: 0 } });
    expect(third.status).toBe(429);
    expect(third.body.error.type).toBe('RateLimitError');
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
  });

  it('removes a password: the retriever answers everyone again', async () => {
    await f.retriever('was-locked');
    await f.api('POST', '/v1/retrievers/was-locked/publish', { public_name: 'was-locked', password: PASSWORD });
    expect((await pub('POST', '/v1/public/retrievers/was-locked/execute', { inputs: { n: 0 } })).status).toBe(401);
    const patched = await f.api('PATCH', '/v1/retrievers/was-locked/publish', { password: null });
    expect(patched.body.password_protected).toBe(false);
    expect((await pub('POST', '/v1/public/retrievers/was-locked/execute', { inputs: { n: 0 } })).status).toBe(200);
    await f.api('DELETE', '/v1/retrievers/was-locked/publish');
  });

  it('counts hours and days too: a per-day limit answers 429 with the day window', async () => {
    await f.retriever('daily');
    await f.api('POST', '/v1/retrievers/daily/publish', { public_name: 'daily-lamps', rate_limits: { tier: 'free', per_day: 1 } });
    expect((await pub('POST', '/v1/public/retrievers/daily-lamps/execute', { inputs: { n: 0 } })).status).toBe(200);
    const refused = await pub('POST', '/v1/public/retrievers/daily-lamps/execute', { inputs: { n: 0 } });
    expect(refused.status).toBe(429);
    expect(refused.body.error.details).toMatchObject({ limit: 1, window_seconds: 86400 });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    await f.api('PATCH', '/v1/retrievers/daily/publish', { rate_limits: { per_day: 1000, per_hour: 1 } });
    const hourly = await pub('POST', '/v1/public/retrievers/daily-lamps/execute', { inputs: { n: 0 } });
    expect(hourly.status).toBe(429);
    expect(hourly.body.error.details).toMatchObject({ limit: 1, window_seconds: 3600 });
  });

  it('answers 429 past the per-address limit', async () => {
    await f.retriever('per-ip');
    await f.api('POST', '/v1/retrievers/per-ip/publish', { public_name: 'per-ip-lamps', rate_limits: { per_ip_per_minute: 1 } });
    expect((await pub('POST', '/v1/public/retrievers/per-ip-lamps/execute', { inputs: { n: 0 } })).status).toBe(200);
    expect((await pub('POST', '/v1/public/retrievers/per-ip-lamps/execute', { inputs: { n: 0 } })).status).toBe(429);
  });

  it('stops answering at once when unpublished, deactivated or renamed', async () => {
    await f.retriever('brief');
    await f.api('POST', '/v1/retrievers/brief/publish', { public_name: 'brief-lamps' });
    expect((await pub('POST', '/v1/public/retrievers/brief-lamps/execute', { inputs: { n: 0 } })).status).toBe(200);
    await f.api('PATCH', '/v1/retrievers/brief/publish', { active: false });
    expect((await pub('POST', '/v1/public/retrievers/brief-lamps/execute', { inputs: { n: 0 } })).status).toBe(404);
    await f.api('PATCH', '/v1/retrievers/brief/publish', { active: true, public_name: 'brief-lamps-2' });
    expect((await pub('POST', '/v1/public/retrievers/brief-lamps/execute', { inputs: { n: 0 } })).status).toBe(404);
    expect((await pub('POST', '/v1/public/retrievers/brief-lamps-2/execute', { inputs: { n: 0 } })).status).toBe(200);
    await f.api('DELETE', '/v1/retrievers/brief/publish');
    for (const path of ['execute', 'config', 'template']) {
      const r = await pub(path === 'execute' ? 'POST' : 'GET', `/v1/public/retrievers/brief-lamps-2/${path}`, path === 'execute' ? { inputs: { n: 0 } } : undefined);
      expect(r.status, path).toBe(404);
    }
    expect((await pub('POST', '/v1/public/retrievers/hidden-lamps/execute', { inputs: { n: 0 } })).status).toBe(404);
    // Deleting the retriever deletes its publication.
    await f.retriever('deleted');
    await f.api('POST', '/v1/retrievers/deleted/publish', { public_name: 'deleted-lamps' });
    expect((await pub('GET', '/v1/marketplace/catalog/deleted-lamps/config', undefined, {}, true)).status).toBe(200);
    expect((await f.api('DELETE', '/v1/retrievers/deleted')).status).toBe(200);
    for (const path of ['execute', 'config', 'template']) {
      const r = await pub(path === 'execute' ? 'POST' : 'GET', `/v1/public/retrievers/deleted-lamps/${path}`, path === 'execute' ? { inputs: { n: 0 } } : undefined);
      expect(r.status, path).toBe(404);
    }
  });

  it('LEAK: no public response shows a secret, an internal id or an unexposed field', () => {
    expect(seen.length).toBeGreaterThan(40);
    const secrets = [...f.secrets].filter((s) => s.length >= 6);
    expect(secrets.length).toBeGreaterThanOrEqual(10);
    for (const { what, response, allowPublicKey } of seen) {
      for (const secret of secrets) {
        if (allowPublicKey && (secret === openKey || secret === lockedKey)) continue;
        expect(response.text.includes(secret), `${what} shows ${secret.slice(0, 12)}…`).toBe(false);
      }
      expect(response.text).not.toContain(SECRET_NOTE);
      expect(response.text).not.toContain('internal_note');
      expect(response.text).not.toMatch(/"(organization_id|namespace_id|collection_id|retriever_id|root_object_id|storage_key)"/);
    }
  });
});
