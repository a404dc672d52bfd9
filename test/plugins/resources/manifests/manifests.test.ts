/**
 * Manifests and organization secrets through HTTP: validate (syntax, schema, references, secrets, cycles,
 * all problems at once with their paths), apply (dependency order, idempotent re-apply, all-or-nothing with
 * rollback, scopes, other organizations untouched, secret substitution never echoed), diff, export → apply
 * round trip into another organization, multipart and raw YAML bodies, size limits and hostile YAML.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TenantStore } from '../../../../kernel/tokens.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

const SECRET_VALUE = 'sUp3r-s3cret-VALUE-42';

function manifest(ns: string, extra = ''): string {
  return `
version: "1"
metadata:
  name: shop
namespaces:
  - name: ${ns}
    description: Shop search
    feature_extractors:
      - name: text_extractor
buckets:
  - name: catalog
    namespace: ${ns}
    description: \${{ secrets.CATALOG_DESCRIPTION }}
    schema:
      properties:
        title: { type: string }
        text: { type: text }
collections:
  - name: catalog-fields
    namespace: ${ns}
    source: { type: collection, collection_id: catalog-text }
    feature_extractors:
      - feature_extractor_name: passthrough_extractor
  - name: catalog-text
    namespace: ${ns}
    source: { type: bucket, bucket_id: catalog }
    feature_extractors:
      - feature_extractor_name: text_extractor
retrievers:
  - name: passages
    namespace: ${ns}
    collection_identifiers: [catalog-text]
    input_schema:
      query: { type: text, required: true }
    stages:
      - stage_name: search
        stage_type: filter
        config:
          stage_id: text_search
          parameters:
            query: "{{inputs.query}}"
            top_k: 5
${extra}`;
}

describe('manifests', () => {
  let t: TestKernel;

  async function send(op: 'apply' | 'validate' | 'diff', text: string, key = t.adminKey, field = 'manifest_file') {
    const form = new FormData();
    form.append(field, new Blob([text], { type: 'application/yaml' }), 'manifest.yaml');
    const res = await fetch(`${t.url}/v1/manifest/${op}`, { method: 'POST', headers: { Authorization: `Bearer ${key}` }, body: form });
    const textBody = await res.text();
    let body: any;
    try {
      body = JSON.parse(textBody);
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text: textBody };
  }
  const api = (method: string, path: string, ns?: string, body?: unknown, key = t.adminKey) =>
    t.request(method, path, { key, ...(ns ? { headers: { 'X-Namespace': ns } } : {}), ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    const made = await api('POST', '/v1/organizations/secrets', undefined, { name: 'CATALOG_DESCRIPTION', value: SECRET_VALUE });
    expect(made.status, made.text).toBe(201);
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  describe('organization secrets', () => {
    it('stores, lists by name, replaces and deletes; never returns a value', async () => {
      const created = await api('POST', '/v1/organizations/secrets', undefined, { name: 'TEMP_TOKEN', value: 'abcdefgh-1234' });
      expect(created.status, created.text).toBe(201);
      expect(created.body).toMatchObject({ name: 'TEMP_TOKEN', created_by: t.adminEmail });
      expect((await api('POST', '/v1/organizations/secrets', undefined, { name: 'TEMP_TOKEN', value: 'abcdefgh-1234' })).status).toBe(409);
      expect((await api('POST', '/v1/organizations/secrets', undefined, { name: 'lower', value: 'abcdefgh-1234' })).status).toBe(422);
      const list = await api('GET', '/v1/organizations/secrets');
      expect(list.body.results.map((s: { name: string }) => s.name)).toEqual(['CATALOG_DESCRIPTION', 'TEMP_TOKEN']);
      expect(list.text).not.toContain('abcdefgh');
      expect(list.text).not.toContain(SECRET_VALUE);
      expect((await api('PUT', '/v1/organizations/secrets/TEMP_TOKEN', undefined, { value: 'zyxwvuts-9876' })).status).toBe(200);
      expect((await api('DELETE', '/v1/organizations/secrets/TEMP_TOKEN')).status).toBe(200);
      expect((await api('DELETE', '/v1/organizations/secrets/TEMP_TOKEN')).status).toBe(404);
    });

    it('needs the admin permission', async () => {
      const user = await api('POST', '/v1/organizations/users', undefined, { email: 'writer@example.test', name: 'W' });
      expect(user.status, user.text).toBe(201);
      const key = await api('POST', '/v1/organizations/users/writer@example.test/api-keys', undefined, { name: 'w', permissions: ['delete'] });
      expect((await api('GET', '/v1/organizations/secrets', undefined, undefined, key.body.key)).status).toBe(403);
    });
  });

  describe('validate', () => {
    it('accepts a good manifest and names the secrets it uses', async () => {
      const res = await send('validate', manifest('validated'));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ valid: true, errors: [], counts: { namespaces: 1, buckets: 1, collections: 2, retrievers: 1 }, secrets: ['CATALOG_DESCRIPTION'] });
      expect(res.text).not.toContain(SECRET_VALUE);
      expect((await api('GET', '/v1/namespaces/validated')).status).toBe(404);
    });

    it('reports a YAML syntax error with its line and column', async () => {
      const res = await send('validate', 'version: "1"\nmetadata:\n  name: [unclosed\n');
      expect(res.status).toBe(200);
      expect(res.body.valid).toBe(false);
      expect(res.body.errors[0]).toMatchObject({ type: 'yaml_syntax' });
      expect(res.body.errors[0].line).toBeGreaterThan(0);
    });

    it('reports schema problems, missing secrets and references all at once, each at its path', async () => {
      const bad = manifest('refs').replace('name: catalog-fields', 'name: catalog-fields\n    colour: red').replace('CATALOG_DESCRIPTION', 'NO_SUCH_SECRET');
      const res = await send('validate', bad);
      expect(res.body.valid).toBe(false);
      expect(res.body.errors).toEqual(expect.arrayContaining([
        expect.objectContaining({ path: 'collections[0].colour', type: 'schema' }),
        expect.objectContaining({ path: 'buckets[0].description', type: 'secret' }),
      ]));
      const refs = manifest('refs').replace('collection_id: catalog-text', 'collection_id: nowhere').replace('[catalog-text]', '[catalog-text, missing]');
      const res2 = await send('validate', refs);
      expect(res2.body.errors).toEqual([
        expect.objectContaining({ path: 'collections[0].source.collection_id', type: 'reference' }),
        expect.objectContaining({ path: 'retrievers[0].collection_identifiers[1]', type: 'reference' }),
      ]);
    });

    it('refuses taxonomies and clusters as not supported yet, and bucket sync', async () => {
      const res = await send('validate', manifest('tax', 'taxonomies:\n  - name: t\nclusters: []\n'));
      expect(res.body.errors).toEqual([expect.objectContaining({ path: 'taxonomies', type: 'not_supported', message: expect.stringMatching(/not supported yet/) })]);
      const applied = await send('apply', manifest('tax', 'taxonomies:\n  - name: t\n'));
      expect(applied.status).toBe(422);
      expect(applied.body.detail[0].msg).toMatch(/taxonomies are not supported yet/);
      const synced = await send('validate', manifest('tax').replace('    description: \${{ secrets.CATALOG_DESCRIPTION }}', '    sync: { connection_id: conn_1 }'));
      expect(synced.body.errors).toEqual([expect.objectContaining({ path: 'buckets[0].sync', type: 'not_supported' })]);
    });

    it('detects a cycle between collections and names its members', async () => {
      const cyclic = manifest('cyc').replace('source: { type: bucket, bucket_id: catalog }', 'source: { type: collection, collection_id: catalog-fields }');
      const res = await send('validate', cyclic);
      expect(res.body.errors).toEqual([expect.objectContaining({ type: 'cycle', message: expect.stringMatching(/cyc\/catalog-(fields|text) -> cyc\/catalog-(text|fields) -> /) })]);
      const applied = await send('apply', cyclic);
      expect(applied.status).toBe(422);
      expect((await api('GET', '/v1/namespaces/cyc')).status).toBe(404);
    });
  });

  describe('apply', () => {
    it('creates everything in dependency order, substitutes secrets, and the retriever runs', async () => {
      const res = await send('apply', manifest('shop'));
      expect(res.status, res.text).toBe(200);
      expect(res.body.results.map((r: { path: string; action: string }) => `${r.path} ${r.action}`)).toEqual([
        'namespaces[0] created', 'buckets[0] created', 'collections[1] created', 'collections[0] created', 'retrievers[0] created',
      ]);
      expect(res.text).not.toContain(SECRET_VALUE);
      const bucket = await api('GET', '/v1/buckets/catalog', 'shop');
      expect(bucket.body.description).toBe(SECRET_VALUE);
      const run = await api('POST', '/v1/retrievers/passages/execute', 'shop', { inputs: { query: 'lamp' } });
      expect(run.status, run.text).toBe(200);
      expect(run.body.status).toBe('completed');
    });

    it('leaves what exists as declared alone, and refuses one that differs, naming the fields', async () => {
      const again = await send('apply', manifest('shop'));
      expect(again.status, again.text).toBe(200);
      expect(again.body).toMatchObject({ created: 0, unchanged: 5 });
      const changed = await send('apply', manifest('shop').replace('description: Shop search', 'description: Other'));
      expect(changed.status).toBe(409);
      expect(changed.body.error.details.conflicts).toEqual([expect.objectContaining({ path: 'namespaces[0]', fields: ['description'] })]);
    });

    it('diff says create, unchanged, differs and extra', async () => {
      expect((await api('POST', '/v1/buckets', 'shop', { bucket_name: 'extra-bucket' })).status).toBe(201);
      const res = await send('diff', manifest('shop').replace('top_k: 5', 'top_k: 7') + `  - name: more\n    namespace: shop\n    collection_identifiers: [catalog-text]\n    stages:\n      - stage_name: s\n        config: { stage_id: text_search, parameters: { query: lamp } }\n`);
      expect(res.status, res.text).toBe(200);
      expect(res.body.summary).toEqual({ create: 1, unchanged: 4, differs: 1, extra: 1 });
      expect(res.body.changes).toEqual(expect.arrayContaining([
        expect.objectContaining({ path: 'retrievers[0]', action: 'differs', fields: ['stages'] }),
        expect.objectContaining({ name: 'extra-bucket', action: 'extra', path: null }),
      ]));
      expect(res.text).not.toContain(SECRET_VALUE);
      expect((await api('DELETE', '/v1/buckets/extra-bucket', 'shop')).status).toBe(200);
    });

    it('rolls back everything when a creation fails midway, and says which entry failed', async () => {
      const broken = manifest('half').replace('stage_id: text_search', 'stage_id: no_such_stage');
      const res = await send('apply', broken);
      expect(res.status, res.text).toBe(400);
      expect(res.body.error.details.failed).toMatchObject({ path: 'retrievers[0]', kind: 'retriever' });
      expect(res.body.error.details.not_rolled_back).toEqual([]);
      expect((await api('GET', '/v1/namespaces/half')).status).toBe(404);
      // Into an existing namespace: each created resource is deleted on its own.
      expect((await api('POST', '/v1/namespaces', undefined, { namespace_name: 'existing' })).status).toBe(201);
      const into = broken.replaceAll('half', 'existing').replace(/namespaces:\n  - name: existing\n    description: Shop search\n    feature_extractors:\n      - name: text_extractor\n/, '');
      const res2 = await send('apply', into);
      expect(res2.status, res2.text).toBe(400);
      expect(res2.body.error.details.rolled_back).toEqual(['collections[0]', 'collections[1]', 'buckets[0]']);
      expect((await api('GET', '/v1/buckets', 'existing')).body.results).toEqual([]);
      expect((await api('GET', '/v1/collections', 'existing')).body.results).toEqual([]);
      expect((await api('GET', '/v1/retrievers', 'existing')).body.results).toEqual([]);
    });

    it('a scoped key applies only inside its scopes, and its refused apply leaves nothing', async () => {
      const key = await api('POST', '/v1/organizations/users/writer@example.test/api-keys', undefined, {
        name: 'team', permissions: ['delete'], scopes: [{ resource_type: 'namespace', resource_id: 'team_*' }],
      });
      expect(key.status, key.text).toBe(201);
      const ok = await send('apply', manifest('team_a'), key.body.key);
      expect(ok.status, ok.text).toBe(200);
      const two = manifest('team_b') + `  - name: elsewhere\n    namespace: shop\n    collection_identifiers: [catalog-text]\n    stages:\n      - stage_name: s\n        config: { stage_id: text_search, parameters: { query: lamp } }\n`;
      const refused = await send('apply', two, key.body.key);
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(refused.status).toBeLessThan(500);
      expect((await api('GET', '/v1/namespaces/team_b')).status).toBe(404);
      expect((await api('GET', '/v1/retrievers/elsewhere', 'shop')).status).toBe(404);
    });

    it('a write key cannot apply (rollback needs delete)', async () => {
      const key = await api('POST', '/v1/organizations/users/writer@example.test/api-keys', undefined, { name: 'writer', permissions: ['write'] });
      expect((await send('apply', manifest('w'), key.body.key)).status).toBe(403);
    });
  });

  describe('export', () => {
    it('exports YAML that recreates the setup in another organization, secrets as references', async () => {
      const exported = await t.request('GET', '/v1/manifest/export?namespace=shop&name=moved', { key: t.adminKey });
      expect(exported.status, exported.text).toBe(200);
      expect(exported.headers.get('content-type')).toMatch(/application\/yaml/);
      expect(exported.text).not.toContain(SECRET_VALUE);
      expect(exported.text).toContain('${{ secrets.CATALOG_DESCRIPTION }}');
      expect(exported.text).not.toMatch(/\b(bkt|col|ns)_[0-9a-z]/);

      const org = await t.kernel.services.get(TenantStore).createOrganization({ name: 'target', ownerEmail: 'target@example.test' });
      const otherKey = org.adminKeyPlaintext;
      const missing = await send('validate', exported.text, otherKey);
      expect(missing.body.errors).toEqual([expect.objectContaining({ path: 'buckets[0].description', type: 'secret' })]);
      expect((await api('POST', '/v1/organizations/secrets', undefined, { name: 'CATALOG_DESCRIPTION', value: 'another-deployment' }, otherKey)).status).toBe(201);
      const applied = await send('apply', exported.text, otherKey);
      expect(applied.status, applied.text).toBe(200);
      expect(applied.body).toMatchObject({ created: 5, unchanged: 0 });
      const reexported = await t.request('GET', '/v1/manifest/export?name=moved', { key: otherKey });
      expect(reexported.text).toBe(exported.text);
      const run = await api('POST', '/v1/retrievers/passages/execute', 'shop', { inputs: { query: 'lamp' } }, otherKey);
      expect(run.body.status).toBe('completed');
      // The first organization's namespace is untouched, and cannot be reached from the other one's key.
      expect((await api('GET', '/v1/buckets/catalog', 'shop')).body.description).toBe(SECRET_VALUE);
      const first = await t.request('GET', '/v1/manifest/export', { key: otherKey });
      expect(first.text).not.toContain('team_a');
    });
  });

  describe('bodies', () => {
    it('takes the YAML as an application/yaml body too', async () => {
      const res = await t.request('POST', '/v1/manifest/validate', { key: t.adminKey, headers: { 'Content-Type': 'application/yaml' }, body: manifest('raw') });
      expect(res.status, res.text).toBe(200);
      expect(res.body.valid).toBe(true);
    });

    it('refuses a missing field (422), a body over 1 MiB (413) and malformed forms (400)', async () => {
      expect((await send('validate', manifest('x'), t.adminKey, 'other_field')).status).toBe(422);
      const huge = manifest('x') + `# ${'x'.repeat(1024 * 1024)}\n`;
      expect((await send('validate', huge)).status).toBe(413);
      const yamlHuge = await t.request('POST', '/v1/manifest/validate', { key: t.adminKey, headers: { 'Content-Type': 'application/yaml' }, body: huge });
      expect(yamlHuge.status).toBe(413);
      const malformed = await t.request('POST', '/v1/manifest/validate', {
        key: t.adminKey, headers: { 'Content-Type': 'multipart/form-data; boundary=xyz' }, body: '--xyz\r\nContent-Disposition: form-data; name="manifest_file"\r\n\r\nabc',
      });
      expect(malformed.status).toBe(400);
      expect((await t.request('POST', '/v1/manifest/validate', { key: t.adminKey, headers: { 'Content-Type': 'multipart/form-data' }, body: 'x' })).status).toBe(400);
    });

    it('answers hostile YAML (alias bombs, deep nesting, custom tags) with a 4xx', async () => {
      const bomb = ['version: "1"', 'a: &a ["x","x","x","x","x","x","x","x","x","x"]'];
      for (let i = 1; i < 9; i++) bomb.push(`${String.fromCharCode(97 + i)}: &${String.fromCharCode(97 + i)} [${Array(10).fill(`*${String.fromCharCode(96 + i)}`).join(',')}]`);
      const res = await send('validate', bomb.join('\n'));
      expect(res.status).toBe(200);
      expect(res.body.errors[0]).toMatchObject({ type: 'yaml_syntax', message: expect.stringMatching(/alias/i) });
      const deep = `version: "1"\nmetadata: ${'['.repeat(100_000)}${']'.repeat(100_000)}\n`;
      expect((await send('validate', deep)).body.errors[0].message).toMatch(/deeper than 64/);
      let block = 'version: "1"\nmetadata:\n';
      for (let i = 1; i < 200; i++) block += `${' '.repeat(i)}k:\n`;
      expect((await send('validate', block)).body.errors[0].message).toMatch(/deeper than 64/);
      const tagged = await send('apply', 'version: "1"\nmetadata: { name: !!binary aGVsbG8= }\n');
      expect(tagged.status).toBe(422);
    });
  });
});
