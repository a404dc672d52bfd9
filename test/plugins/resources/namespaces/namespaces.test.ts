/** The namespaces resource: create, list, get, update, delete, its name rules and its audit trail. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../../../../generated/openapi.js';
import type { TesseraClient } from '../../../../generated/client.js';
import { TenantStore, resolve } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

type Namespace = components['schemas']['Namespace'];

describe('namespaces', () => {
  let t: TestKernel;

  async function create(name: string, extra: { description?: string | null; metadata?: Record<string, unknown> } = {}): Promise<Namespace> {
    const res = await t.client().POST('/v1/namespaces', { body: { namespace_name: name, ...extra } });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    return res.data!;
  }

  async function auditFor(resourceId: string) {
    const res = await t.client().GET('/v1/organizations/audit-log', { params: { query: { resource_id: resourceId } } });
    expect(res.response.status).toBe(200);
    return res.data!.results;
  }

  beforeAll(async () => {
    t = await startTestKernel();
  });

  afterAll(async () => {
    await t?.stop();
  });

  describe('create', () => {
    it('returns 201 with the namespace, an ns_ id and defaults', async () => {
      const ns = await create('products');
      expect(ns.namespace_id).toMatch(/^ns_/);
      expect(ns.namespace_name).toBe('products');
      expect(ns.description).toBeNull();
      expect(ns.metadata).toEqual({});
      expect(ns.feature_extractors).toEqual([]);
      expect(ns.created_by).toBe(t.adminEmail);
      expect(new Date(ns.created_at).toISOString()).toBe(ns.created_at);
      expect(ns.updated_at).toBe(ns.created_at);
    });

    it('keeps description, metadata and feature extractors', async () => {
      const res = await t.client().POST('/v1/namespaces', {
        body: {
          namespace_name: 'Full_Set-1',
          description: 'all fields',
          metadata: { team: 'search', nested: { n: 1 } },
          feature_extractors: [{ name: 'text_extractor', version: '1.0' }],
        },
      });
      expect(res.response.status).toBe(201);
      expect(res.data).toMatchObject({
        namespace_name: 'Full_Set-1',
        description: 'all fields',
        metadata: { team: 'search', nested: { n: 1 } },
        feature_extractors: [{ name: 'text_extractor', version: '1.0' }],
      });
    });

    it('accepts names of 3 and 50 characters of letters, digits, _ and -', async () => {
      await create('a_b');
      await create(`${'x'.repeat(48)}-9`);
      await create('UPPER-lower_123');
    });

    it('refuses other names with 422', async () => {
      for (const name of ['ab', 'x'.repeat(51), 'with space', 'dots.here', 'slash/es', 'émoji', '']) {
        const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: name } });
        expect(res.status, name).toBe(422);
        expect(res.body.detail[0].loc).toEqual(['body', 'namespace_name']);
      }
    });

    it('reserves templates, whose path is another route', async () => {
      for (const name of ['templates', 'Templates']) {
        const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: name } });
        expect(res.status, name).toBe(422);
        expect(res.body.detail[0]).toMatchObject({ loc: ['body', 'namespace_name'], type: 'reserved_name' });
      }
    });

    it('says in words why a name that looks like an id is refused', async () => {
      const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'ns_shop' } });
      expect(res.status).toBe(422);
      expect(res.body.detail[0].msg).toMatch(/^must match pattern ".*": .*not starting with `ns_` \(that is how ids start\)/);
    });

    it('feature_extractors must name registered extractors, at the version this deployment runs', async () => {
      const unknown = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'fe_check', feature_extractors: [{ name: 'text_extractor' }, { name: 'no_such_extractor' }] } });
      expect(unknown.status).toBe(422);
      expect(unknown.body.detail).toEqual([expect.objectContaining({ loc: ['body', 'feature_extractors', 1, 'name'], type: 'unknown_extractor', msg: expect.stringMatching(/registered: .*text_extractor/) })]);
      const version = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'fe_check', feature_extractors: [{ name: 'text_extractor', version: '9.9' }] } });
      expect(version.status).toBe(422);
      expect(version.body.detail[0]).toMatchObject({ loc: ['body', 'feature_extractors', 0, 'version'], type: 'extractor_version' });
      expect((await t.request('GET', '/v1/namespaces/fe_check', { key: t.adminKey })).status).toBe(404);
    });

    it('refuses a description over 500 characters and accepts exactly 500', async () => {
      const tooLong = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: 'long-desc', description: 'd'.repeat(501) } });
      expect(tooLong.status).toBe(422);
      expect(tooLong.body.detail[0].loc).toEqual(['body', 'description']);
      const ok = await create('long-desc', { description: 'd'.repeat(500) });
      expect(ok.description).toHaveLength(500);
    });

    it('names are unique per organization, case-insensitively (409)', async () => {
      await create('Unique-Name');
      for (const name of ['Unique-Name', 'unique-name', 'UNIQUE-NAME']) {
        const res = await t.request('POST', '/v1/namespaces', { key: t.adminKey, body: { namespace_name: name } });
        expect(res.status, name).toBe(409);
        expect(res.body).toMatchObject({ success: false, status: 409, error: { type: 'ConflictError' } });
      }
      const list = await t.client().GET('/v1/namespaces', { params: { query: { search: 'unique' } } });
      expect(list.data!.results).toHaveLength(1);
    });

    it('records namespace_created in the audit log', async () => {
      const ns = await create('audited', { description: 'first' });
      const events = await auditFor(ns.namespace_id);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        action: 'namespace_created',
        resource_type: 'namespace',
        resource_id: ns.namespace_id,
        resource_name: 'audited',
        actor: { user_email: t.adminEmail },
        changes: { namespace_name: 'audited', description: 'first' },
      });
      expect(events[0]!.actor.key_id).toMatch(/^key_/);
      expect(events[0]!.request_id).toBeTruthy();
    });
  });

  describe('get', () => {
    it('finds a namespace by name (any case) and by ns_ id', async () => {
      const ns = await create('findable');
      for (const name of ['findable', 'FINDABLE', ns.namespace_id]) {
        const res = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name } } });
        expect(res.response.status, name).toBe(200);
        expect(res.data).toEqual(ns);
      }
    });

    it('answers 404 for an unknown name or id', async () => {
      for (const name of ['nothing-here', 'ns_doesnotexist']) {
        const res = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name } } });
        expect(res.response.status).toBe(404);
        expect(res.error).toMatchObject({ status: 404, error: { type: 'NotFoundError' } });
      }
    });
  });

  describe('list', () => {
    /** A client of a second organization, so the list holds exactly these namespaces. */
    let t2: { client(): TesseraClient };
    const names = ['alpha', 'Bravo', 'charlie', 'delta', 'echo-search', 'foxtrot', 'golf_search'];

    beforeAll(async () => {
      const org = await resolve(t.kernel.container, TenantStore).createOrganization({ name: 'lister', ownerEmail: 'lister@example.test' });
      t2 = { client: () => t.client(org.adminKeyPlaintext) };
      for (const name of [...names].reverse()) {
        expect((await t2.client().POST('/v1/namespaces', { body: { namespace_name: name } })).response.status).toBe(201);
      }
    });

    it('lists every namespace by name, case-insensitively ordered, with defaults limit 100 offset 0', async () => {
      const res = await t2.client().GET('/v1/namespaces', {});
      expect(res.response.status).toBe(200);
      expect(res.data!.results.map((n) => n.namespace_name)).toEqual(names);
      expect(res.data).toMatchObject({ total: names.length, limit: 100, offset: 0, has_next: false });
    });

    it('pages with limit and offset, reporting has_next', async () => {
      const seen: string[] = [];
      for (let offset = 0; offset < names.length; offset += 3) {
        const res = await t2.client().GET('/v1/namespaces', { params: { query: { limit: 3, offset } } });
        expect(res.data!.limit).toBe(3);
        expect(res.data!.offset).toBe(offset);
        expect(res.data!.total).toBe(names.length);
        expect(res.data!.has_next).toBe(offset + 3 < names.length);
        seen.push(...res.data!.results.map((n) => n.namespace_name));
      }
      expect(seen).toEqual(names);
      const past = await t2.client().GET('/v1/namespaces', { params: { query: { limit: 3, offset: 50 } } });
      expect(past.data!.results).toEqual([]);
      expect(past.data!.has_next).toBe(false);
    });

    it('searches by case-insensitive substring of the name', async () => {
      const res = await t2.client().GET('/v1/namespaces', { params: { query: { search: 'SEARCH' } } });
      expect(res.data!.results.map((n) => n.namespace_name)).toEqual(['echo-search', 'golf_search']);
      expect(res.data!.total).toBe(2);
      const bravo = await t2.client().GET('/v1/namespaces', { params: { query: { search: 'rav' } } });
      expect(bravo.data!.results.map((n) => n.namespace_name)).toEqual(['Bravo']);
      const none = await t2.client().GET('/v1/namespaces', { params: { query: { search: 'zzz' } } });
      expect(none.data).toMatchObject({ results: [], total: 0, has_next: false });
    });

    it('treats _ and % in a search literally', async () => {
      const underscore = await t2.client().GET('/v1/namespaces', { params: { query: { search: '_' } } });
      expect(underscore.data!.results.map((n) => n.namespace_name)).toEqual(['golf_search']);
      const percent = await t2.client().GET('/v1/namespaces', { params: { query: { search: '%' } } });
      expect(percent.data!.results).toEqual([]);
    });

    it('combines search with paging', async () => {
      const res = await t2.client().GET('/v1/namespaces', { params: { query: { search: 'search', limit: 1, offset: 0 } } });
      expect(res.data!.results.map((n) => n.namespace_name)).toEqual(['echo-search']);
      expect(res.data!.has_next).toBe(true);
      expect(res.data!.total).toBe(2);
    });
  });

  describe('update', () => {
    it('renames a namespace; the old name stops resolving, the id keeps working', async () => {
      const ns = await create('before-rename');
      const res = await t.client().PATCH('/v1/namespaces/{name}', {
        params: { path: { name: 'before-rename' } },
        body: { namespace_name: 'after-rename' },
      });
      expect(res.response.status).toBe(200);
      expect(res.data!.namespace_name).toBe('after-rename');
      expect(res.data!.namespace_id).toBe(ns.namespace_id);
      expect((await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'before-rename' } } })).response.status).toBe(404);
      const byId = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: ns.namespace_id } } });
      expect(byId.data!.namespace_name).toBe('after-rename');
      // X-Namespace follows the rename at once.
      expect((await t.request('GET', '/v1/me', { key: t.adminKey, headers: { 'X-Namespace': 'before-rename' } })).status).toBe(404);
      const me = await t.request('GET', '/v1/me', { key: t.adminKey, headers: { 'X-Namespace': 'after-rename' } });
      expect(me.status).toBe(200);
      expect(me.body.namespace.namespace_id).toBe(ns.namespace_id);
    });

    it('changes description and metadata by id, and moves updated_at', async () => {
      const ns = await create('describe-me', { description: 'old', metadata: { a: 1 } });
      const res = await t.client().PATCH('/v1/namespaces/{name}', {
        params: { path: { name: ns.namespace_id } },
        body: { description: 'new', metadata: { b: 2 } },
      });
      expect(res.response.status).toBe(200);
      expect(res.data).toMatchObject({ namespace_name: 'describe-me', description: 'new', metadata: { b: 2 } });
      expect(res.data!.created_at).toBe(ns.created_at);
      expect(new Date(res.data!.updated_at).getTime()).toBeGreaterThanOrEqual(new Date(ns.updated_at).getTime());
      const got = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'describe-me' } } });
      expect(got.data).toEqual(res.data);
      // null clears the description.
      const cleared = await t.client().PATCH('/v1/namespaces/{name}', { params: { path: { name: 'describe-me' } }, body: { description: null } });
      expect(cleared.data!.description).toBeNull();
      expect(cleared.data!.metadata).toEqual({ b: 2 });
    });

    it('an empty body is a 400 and changes nothing', async () => {
      const ns = await create('empty-patch', { description: 'kept' });
      const res = await t.request('PATCH', '/v1/namespaces/empty-patch', { key: t.adminKey, body: {} });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ success: false, status: 400, error: { type: 'InputError' } });
      const got = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'empty-patch' } } });
      expect(got.data).toEqual(ns);
      expect((await auditFor(ns.namespace_id)).map((e) => e.action)).toEqual(['namespace_created']);
    });

    it('renaming onto a taken name (any case) is a 409 and changes nothing', async () => {
      await create('taken-name');
      const ns = await create('wants-rename');
      const res = await t.request('PATCH', '/v1/namespaces/wants-rename', { key: t.adminKey, body: { namespace_name: 'TAKEN-name' } });
      expect(res.status).toBe(409);
      expect(res.body.error.type).toBe('ConflictError');
      const got = await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: ns.namespace_id } } });
      expect(got.data!.namespace_name).toBe('wants-rename');
      expect((await auditFor(ns.namespace_id)).map((e) => e.action)).toEqual(['namespace_created']);
    });

    it('may change only the case of its own name', async () => {
      await create('case-change');
      const res = await t.client().PATCH('/v1/namespaces/{name}', { params: { path: { name: 'case-change' } }, body: { namespace_name: 'Case-Change' } });
      expect(res.response.status).toBe(200);
      expect(res.data!.namespace_name).toBe('Case-Change');
    });

    it('an unknown namespace is a 404', async () => {
      const res = await t.client().PATCH('/v1/namespaces/{name}', { params: { path: { name: 'missing-ns' } }, body: { description: 'x' } });
      expect(res.response.status).toBe(404);
    });

    it('records namespace_updated with what changed', async () => {
      const ns = await create('audit-update', { description: 'd1' });
      await t.client().PATCH('/v1/namespaces/{name}', {
        params: { path: { name: 'audit-update' } },
        body: { namespace_name: 'audit-updated', description: 'd2' },
      });
      const events = await auditFor(ns.namespace_id);
      expect(events.map((e) => e.action)).toEqual(['namespace_updated', 'namespace_created']);
      expect(events[0]).toMatchObject({
        resource_name: 'audit-updated',
        changes: { namespace_name: { from: 'audit-update', to: 'audit-updated' }, description: { from: 'd1', to: 'd2' } },
      });
      expect(Object.keys(events[0]!.changes).sort()).toEqual(['description', 'namespace_name']);
    });
  });

  describe('delete', () => {
    it('deletes by name; afterwards get, X-Namespace and a second delete are 404', async () => {
      const ns = await create('doomed');
      // Resolve it once through X-Namespace so any cache holds it.
      expect((await t.request('GET', '/v1/me', { key: t.adminKey, headers: { 'X-Namespace': 'doomed' } })).status).toBe(200);
      const res = await t.client().DELETE('/v1/namespaces/{name}', { params: { path: { name: 'doomed' } } });
      expect(res.response.status).toBe(200);
      expect(res.data).toEqual({ namespace_id: ns.namespace_id, namespace_name: 'doomed', deleted: true });
      expect((await t.client().GET('/v1/namespaces/{name}', { params: { path: { name: 'doomed' } } })).response.status).toBe(404);
      for (const header of ['doomed', ns.namespace_id]) {
        const me = await t.request('GET', '/v1/me', { key: t.adminKey, headers: { 'X-Namespace': header } });
        expect(me.status, header).toBe(404);
        expect(me.body.error.type).toBe('NotFoundError');
      }
      expect((await t.client().DELETE('/v1/namespaces/{name}', { params: { path: { name: 'doomed' } } })).response.status).toBe(404);
      const list = await t.client().GET('/v1/namespaces', { params: { query: { search: 'doomed' } } });
      expect(list.data!.results).toEqual([]);
    });

    it('deletes by id, frees the name, and records namespace_deleted', async () => {
      const ns = await create('recycled');
      const res = await t.client().DELETE('/v1/namespaces/{name}', { params: { path: { name: ns.namespace_id } } });
      expect(res.response.status).toBe(200);
      const events = await auditFor(ns.namespace_id);
      expect(events.map((e) => e.action)).toEqual(['namespace_deleted', 'namespace_created']);
      expect(events[0]).toMatchObject({ resource_type: 'namespace', resource_name: 'recycled', actor: { user_email: t.adminEmail } });
      const again = await create('recycled');
      expect(again.namespace_id).not.toBe(ns.namespace_id);
    });
  });

  describe('permissions', () => {
    it('a read key may list and get but not create, update or delete', async () => {
      const email = 'reader@example.test';
      expect((await t.client().POST('/v1/organizations/users', { body: { email } })).response.status).toBe(201);
      const key = await t.client().POST('/v1/organizations/users/{user_email}/api-keys', {
        params: { path: { user_email: email } },
        body: { name: 'reader', permissions: ['read'] },
      });
      const reader = t.client(key.data!.key);
      await create('read-only-target');
      expect((await reader.GET('/v1/namespaces', {})).response.status).toBe(200);
      expect((await reader.GET('/v1/namespaces/{name}', { params: { path: { name: 'read-only-target' } } })).response.status).toBe(200);
      expect((await reader.POST('/v1/namespaces', { body: { namespace_name: 'by-reader' } })).response.status).toBe(403);
      expect((await reader.PATCH('/v1/namespaces/{name}', { params: { path: { name: 'read-only-target' } }, body: { description: 'x' } })).response.status).toBe(403);
      expect((await reader.DELETE('/v1/namespaces/{name}', { params: { path: { name: 'read-only-target' } } })).response.status).toBe(403);
    });
  });
});
