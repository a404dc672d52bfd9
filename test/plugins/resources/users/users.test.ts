/** The users resource: create, list, get, delete (which revokes the user's keys), and its guards. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TesseraClient } from '../../../../generated/client.js';
import { TenantStore, resolve } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('users', () => {
  let t: TestKernel;
  let admin: TesseraClient;

  async function createUser(email: string, name?: string) {
    const res = await admin.POST('/v1/organizations/users', { body: { email, ...(name ? { name } : {}) } });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    return res.data!;
  }

  async function createKey(email: string, name: string, permissions?: Array<'read' | 'write' | 'delete' | 'admin'>) {
    const res = await admin.POST('/v1/organizations/users/{user_email}/api-keys', {
      params: { path: { user_email: email } },
      body: { name, ...(permissions ? { permissions } : {}) },
    });
    expect(res.response.status, JSON.stringify(res.error)).toBe(201);
    return res.data!;
  }

  beforeAll(async () => {
    t = await startTestKernel();
    admin = t.client();
  });

  afterAll(async () => {
    await t?.stop();
  });

  describe('create', () => {
    it('returns 201 with the user, its email lowercased', async () => {
      const user = await createUser('Mixed.Case@Example.TEST', 'Mixed Case');
      expect(user).toMatchObject({ email: 'mixed.case@example.test', name: 'Mixed Case', role: 'member', active_key_count: 0 });
      expect(user.user_id).toMatch(/^user_/);
      expect(new Date(user.created_at).toISOString()).toBe(user.created_at);
      const got = await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'mixed.case@example.test' } } });
      expect(got.data).toEqual(user);
    });

    it('name is optional', async () => {
      const user = await createUser('nameless@example.test');
      expect(user.name).toBeNull();
    });

    it('a duplicate email (any case) is a 409', async () => {
      await createUser('dup@example.test');
      for (const email of ['dup@example.test', 'DUP@example.test']) {
        const res = await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email } });
        expect(res.status, email).toBe(409);
        expect(res.body).toMatchObject({ success: false, status: 409, error: { type: 'ConflictError' } });
      }
      // The owner's email is taken too.
      expect((await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email: t.adminEmail } })).status).toBe(409);
    });

    it('a malformed email is a 422', async () => {
      for (const email of ['not-an-email', 'missing-at.example.test', '@example.test', '']) {
        const res = await t.request('POST', '/v1/organizations/users', { key: t.adminKey, body: { email } });
        expect(res.status, email).toBe(422);
        expect(res.body.detail[0].loc).toEqual(['body', 'email']);
      }
    });

    it('records user_created', async () => {
      const user = await createUser('audited-user@example.test');
      const log = await admin.GET('/v1/organizations/audit-log', { params: { query: { resource_id: user.user_id } } });
      expect(log.data!.results).toHaveLength(1);
      expect(log.data!.results[0]).toMatchObject({
        action: 'user_created',
        resource_type: 'user',
        resource_name: 'audited-user@example.test',
        actor: { user_email: t.adminEmail },
      });
    });
  });

  describe('list and get', () => {
    it('lists the owner first, then users in creation order, with limit/offset paging', async () => {
      const all = await admin.GET('/v1/organizations/users', {});
      expect(all.response.status).toBe(200);
      expect(all.data!.limit).toBe(100);
      expect(all.data!.offset).toBe(0);
      expect(all.data!.total).toBe(all.data!.results.length);
      expect(all.data!.results[0]).toMatchObject({ email: t.adminEmail, role: 'owner', active_key_count: 1 });
      const emails = all.data!.results.map((u) => u.email);

      const paged: string[] = [];
      for (let offset = 0; offset < emails.length; offset += 2) {
        const page = await admin.GET('/v1/organizations/users', { params: { query: { limit: 2, offset } } });
        expect(page.data!.limit).toBe(2);
        expect(page.data!.offset).toBe(offset);
        expect(page.data!.total).toBe(emails.length);
        expect(page.data!.results.length).toBeLessThanOrEqual(2);
        paged.push(...page.data!.results.map((u) => u.email));
      }
      expect(paged).toEqual(emails);
      const past = await admin.GET('/v1/organizations/users', { params: { query: { offset: emails.length } } });
      expect(past.data!.results).toEqual([]);
      expect(past.data!.total).toBe(emails.length);
    });

    it('get accepts the email in any case and counts active keys', async () => {
      await createUser('counted@example.test');
      await createKey('counted@example.test', 'one');
      await createKey('counted@example.test', 'two');
      const res = await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'COUNTED@example.test' } } });
      expect(res.response.status).toBe(200);
      expect(res.data!.active_key_count).toBe(2);
      await admin.DELETE('/v1/organizations/users/{user_email}/api-keys/{key_name}', {
        params: { path: { user_email: 'counted@example.test', key_name: 'two' } },
      });
      const after = await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'counted@example.test' } } });
      expect(after.data!.active_key_count).toBe(1);
    });

    it('an unknown user is a 404', async () => {
      const res = await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'nobody@example.test' } } });
      expect(res.response.status).toBe(404);
      expect(res.error).toMatchObject({ success: false, status: 404, error: { type: 'NotFoundError' } });
      expect((await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'nobody@example.test' } } })).response.status).toBe(404);
    });
  });

  describe('delete', () => {
    it("revokes every active key of the user; they stop working at once", async () => {
      const email = 'leaving@example.test';
      await createUser(email);
      const k1 = await createKey(email, 'first');
      const k2 = await createKey(email, 'second', ['read']);
      // Use the keys first, so they are in the authentication cache.
      expect((await t.client(k1.key).GET('/v1/me', {})).response.status).toBe(200);
      expect((await t.client(k2.key).GET('/v1/me', {})).response.status).toBe(200);

      const res = await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });
      expect(res.response.status).toBe(200);
      expect(res.data!.email).toBe(email);
      expect(res.data!.deleted).toBe(true);
      expect([...res.data!.revoked_key_ids].sort()).toEqual([k1.key_id, k2.key_id].sort());

      for (const key of [k1.key, k2.key]) {
        const me = await t.request('GET', '/v1/me', { key });
        expect(me.status).toBe(401);
        expect(me.body.error.type).toBe('AuthenticationError');
      }
      expect((await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } })).response.status).toBe(404);
      const list = await admin.GET('/v1/organizations/users', {});
      expect(list.data!.results.map((u) => u.email)).not.toContain(email);
    });

    it('records api_key_revoked for each key and user_deleted', async () => {
      const email = 'audited-leaver@example.test';
      const user = await createUser(email);
      const key = await createKey(email, 'only');
      await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });

      const revoked = await admin.GET('/v1/organizations/audit-log', { params: { query: { resource_id: key.key_id } } });
      expect(revoked.data!.results.map((e) => e.action)).toEqual(['api_key_revoked', 'api_key_created']);
      expect(revoked.data!.results[0]).toMatchObject({
        resource_type: 'api_key',
        resource_name: 'only',
        changes: { status: { from: 'active', to: 'revoked' }, reason: 'user_deleted' },
      });
      const deleted = await admin.GET('/v1/organizations/audit-log', { params: { query: { resource_id: user.user_id, action: 'user_deleted' } } });
      expect(deleted.data!.results).toHaveLength(1);
      expect(deleted.data!.results[0]).toMatchObject({
        resource_type: 'user',
        resource_name: email,
        changes: { revoked_key_ids: [key.key_id] },
        actor: { user_email: t.adminEmail },
      });
    });

    it('a deleted user has no keys to manage, and none can be created for them', async () => {
      const email = 'gone@example.test';
      await createUser(email);
      await createKey(email, 'stale');
      await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });
      const path = { user_email: email };
      expect((await admin.GET('/v1/organizations/users/{user_email}/api-keys', { params: { path } })).response.status).toBe(404);
      expect((await admin.POST('/v1/organizations/users/{user_email}/api-keys', { params: { path }, body: { name: 'new' } })).response.status).toBe(404);
      expect((await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path } })).response.status).toBe(404);
    });

    it('the same email may be added again later, starting with no keys', async () => {
      const email = 'returning@example.test';
      const first = await createUser(email);
      const oldKey = await createKey(email, 'old');
      await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } });
      const again = await createUser(email);
      expect(again.user_id).not.toBe(first.user_id);
      expect(again.active_key_count).toBe(0);
      expect((await t.request('GET', '/v1/me', { key: oldKey.key })).status).toBe(401);
      const keys = await admin.GET('/v1/organizations/users/{user_email}/api-keys', {
        params: { path: { user_email: email }, query: { include_revoked: true } },
      });
      expect(keys.data!.results).toEqual([]);
    });

    it('the owner cannot be deleted (403), and the admin-key keeps working', async () => {
      const res = await admin.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: t.adminEmail } } });
      expect(res.response.status).toBe(403);
      expect(res.error).toMatchObject({ success: false, status: 403, error: { type: 'NotAllowedError' } });
      expect((await admin.GET('/v1/me', {})).response.status).toBe(200);
      const owner = await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: t.adminEmail } } });
      expect(owner.data!.role).toBe('owner');
    });
  });

  describe('keys for users', () => {
    it('creating a key for an unknown user is a 404 and writes nothing', async () => {
      const res = await admin.POST('/v1/organizations/users/{user_email}/api-keys', {
        params: { path: { user_email: 'ghost@example.test' } },
        body: { name: 'phantom' },
      });
      expect(res.response.status).toBe(404);
      expect(res.error).toMatchObject({ error: { type: 'NotFoundError' } });
      const log = await admin.GET('/v1/organizations/audit-log', { params: { query: { action: 'api_key_created' } } });
      expect(log.data!.results.map((e) => e.resource_name)).not.toContain('phantom');
    });

    it("a user of another organization is unknown here", async () => {
      const other = await resolve(t.kernel.container, TenantStore).createOrganization({ name: 'other', ownerEmail: 'other-owner@example.test' });
      expect((await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'other-owner@example.test' } } })).response.status).toBe(404);
      // Both organizations may have a user with the same email.
      const res = await t.client(other.adminKeyPlaintext).POST('/v1/organizations/users', { body: { email: 'dup@example.test' } });
      expect(res.response.status).toBe(201);
    });
  });

  describe('the audit log of user changes', () => {
    it('pages newest first with limit and next_cursor, without gaps or repeats', async () => {
      for (let i = 0; i < 5; i++) await createUser(`paged-${i}@example.test`);
      const all = await admin.GET('/v1/organizations/audit-log', { params: { query: { action: 'user_created' } } });
      expect(all.data!.has_next).toBe(false);
      expect(all.data!.next_cursor).toBeNull();
      const everything = all.data!.results;
      expect(everything.length).toBeGreaterThanOrEqual(5);
      expect(everything.slice(0, 5).map((e) => e.resource_name)).toEqual([4, 3, 2, 1, 0].map((i) => `paged-${i}@example.test`));
      const times = everything.map((e) => new Date(e.created_at).getTime());
      expect(times).toEqual([...times].sort((a, b) => b - a));

      const paged: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = await admin.GET('/v1/organizations/audit-log', {
          params: { query: { action: 'user_created', limit: 2, ...(cursor ? { cursor } : {}) } },
        });
        expect(page.response.status).toBe(200);
        expect(page.data!.results.length).toBeLessThanOrEqual(2);
        paged.push(...page.data!.results.map((e) => e.event_id));
        if (!page.data!.has_next) {
          expect(page.data!.next_cursor).toBeNull();
          break;
        }
        cursor = page.data!.next_cursor!;
        expect(cursor).toBeTruthy();
      }
      expect(paged).toEqual(everything.map((e) => e.event_id));
    });

    it('filters by action and by time window', async () => {
      const user = await createUser('windowed@example.test');
      const created = user.created_at;
      const mine = await admin.GET('/v1/organizations/audit-log', { params: { query: { resource_id: user.user_id, start: created } } });
      expect(mine.data!.results.map((e) => e.action)).toEqual(['user_created']);
      const before = await admin.GET('/v1/organizations/audit-log', { params: { query: { resource_id: user.user_id, end: created } } });
      expect(before.data!.results).toEqual([]);
      const deletions = await admin.GET('/v1/organizations/audit-log', { params: { query: { action: 'user_deleted' } } });
      expect(deletions.data!.results.every((e) => e.action === 'user_deleted')).toBe(true);
    });

    it('a cursor it did not issue is a 400', async () => {
      const res = await t.request('GET', '/v1/organizations/audit-log?cursor=not-a-cursor', { key: t.adminKey });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ success: false, status: 400, error: { type: 'InputError' } });
    });

    it('only admin keys read it', async () => {
      const email = 'audit-reader@example.test';
      await createUser(email);
      const key = await createKey(email, 'reader', ['read', 'write', 'delete']);
      expect((await t.client(key.key).GET('/v1/organizations/audit-log', {})).response.status).toBe(403);
    });
  });

  describe('permissions', () => {
    it('only admin keys manage users (403 otherwise)', async () => {
      const email = 'non-admin@example.test';
      await createUser(email);
      const key = await createKey(email, 'deleter', ['delete']);
      const c = t.client(key.key);
      expect((await c.GET('/v1/organizations/users', {})).response.status).toBe(403);
      expect((await c.POST('/v1/organizations/users', { body: { email: 'sneaky@example.test' } })).response.status).toBe(403);
      expect((await c.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: email } } })).response.status).toBe(403);
      const del = await c.DELETE('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'dup@example.test' } } });
      expect(del.response.status).toBe(403);
      expect(del.error).toMatchObject({ error: { type: 'NotAllowedError' } });
      expect((await admin.GET('/v1/organizations/users/{user_email}', { params: { path: { user_email: 'dup@example.test' } } })).response.status).toBe(200);
    });
  });
});
