/**
 * The stages that read stored vectors or other collections (mmr, deduplicate by embedding, aggregate,
 * document_enrich) and `return_vectors`, through the whole stack: ad hoc and saved executions over HTTP, as
 * the admin, as user-scoped keys (which must only ever get — or count, or join — their own principal's
 * documents) and as a key whose scopes do not cover the collection a stage joins from.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentSource } from '../../../kernel/tokens.js';
import { Documents } from '../../../plugins/resources/collections/index.js';
import { CONTRACT_FEATURE_URI, contractVector, startStageWorld, type StageWorld } from '../../support/stage-contract.js';

interface Doc {
  document_id: string;
  collection_id?: string;
  score?: number;
  vectors?: Record<string, number[]>;
  payload: { owner_principal?: string | null; fields: Record<string, unknown>; group_key?: unknown; aggregations?: Record<string, unknown>; mmr_score?: number };
}

const cosine = (a: number[], b: number[]) => {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / Math.sqrt(na * nb);
};

describe('vector and join stages through a retriever', () => {
  let world: StageWorld;
  const keys: Record<string, string> = {};
  let catalogId: string;
  let contractId: string;

  const stage = (stage_id: string, parameters: Record<string, unknown>, stage_name = stage_id) => ({ stage_name, config: { stage_id, parameters } });
  const search = stage('feature_search', { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(3) }, top_k: 12 }] });
  const run = (stages: unknown[], key = world.t.adminKey, extra: Record<string, unknown> = {}) =>
    world.t.request('POST', '/v1/retrievers/execute', {
      key, headers: { 'X-Namespace': 'contract' },
      body: { collection_identifiers: ['contract-docs'], input_schema: {}, inputs: {}, stages, pagination: { limit: 100 }, ...extra },
    });
  const execute = async (stages: unknown[], key = world.t.adminKey, extra: Record<string, unknown> = {}) => {
    const res = await run(stages, key, extra);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.status, JSON.stringify(res.body)).toBe('completed');
    return res.body.documents as Doc[];
  };
  const newKey = async (name: string, body: Record<string, unknown>) =>
    (await world.t.request('POST', `/v1/organizations/users/${world.t.adminEmail}/api-keys`, { key: world.t.adminKey, body: { name, permissions: ['read'], ...body } })).body.key as string;

  beforeAll(async () => {
    world = await startStageWorld();
    for (const principal of ['alice', 'bob']) keys[principal] = await newKey(principal, { principal_id: principal });
    // A second collection to join from: one label per chunk_index (0..3) for each owner, plus an unowned one.
    const admin = (method: string, path: string, body: unknown) => world.t.request(method, path, { key: world.t.adminKey, headers: { 'X-Namespace': 'contract' }, body });
    const catalog = (await admin('POST', '/v1/collections/create', { collection_name: 'catalog', source: { type: 'bucket', bucket_id: 'contract-src' } })).body as { collection_id: string };
    catalogId = catalog.collection_id;
    contractId = world.documents[0]!.collection_id!;
    const { organizationId, namespace } = world.context(null, 0);
    for (const [n, owner] of [[0, 'alice'], [1, 'bob'], [2, null], [3, 'alice'], [3, 'bob']] as const) {
      await world.t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: namespace.id, collectionId: catalogId, sourceKey: `catalog:${n}:${owner}`,
        rootObjectId: `cat_${n}_${owner}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
        fields: { chunk_index: n, label: `label ${n} of ${owner ?? 'nobody'}`, owner_mark: owner }, ownerPrincipal: owner,
      });
    }
  }, 120_000);
  afterAll(async () => {
    await world?.t.stop();
  });

  it('lists the stages with their schemas', async () => {
    const res = await world.t.request('GET', '/v1/retrievers/stages', { key: world.t.adminKey });
    const byId = new Map((res.body.results as Array<{ stage_id: string; parameters: Record<string, unknown> }>).map((s) => [s.stage_id, s]));
    for (const id of ['mmr', 'aggregate', 'document_enrich', 'deduplicate']) expect(byId.get(id)?.parameters.type, id).toBe('object');
    expect(byId.get('deduplicate')!.parameters.oneOf).toHaveLength(2);
  });

  it('return_vectors gives each document its stored vectors by feature name, only when asked', async () => {
    const plain = await execute([search]);
    expect(plain).toHaveLength(12);
    for (const d of plain) expect(d.vectors).toBeUndefined();
    const withVectors = await execute([search], world.t.adminKey, { return_vectors: true });
    expect(withVectors.map((d) => d.document_id)).toEqual(plain.map((d) => d.document_id));
    for (const d of withVectors) {
      const i = Number(String(d.payload.fields.text).split(' ')[1]);
      expect(Object.keys(d.vectors!)).toEqual(['text_embedding']);
      const expected = contractVector(i);
      expect(d.vectors!.text_embedding).toHaveLength(expected.length);
      d.vectors!.text_embedding!.forEach((x, j) => expect(x).toBeCloseTo(expected[j]!, 5));
    }
    // synthetic results carry none
    const [summary] = await execute([search, stage('aggregate', { aggregations: [{ function: 'count' }] })], world.t.adminKey, { return_vectors: true });
    expect(summary!.vectors).toBeUndefined();
    expect(summary!.payload.aggregations).toEqual({ count: 12 });
  });

  it('return_vectors on a saved retriever, for a user-scoped key only over its own documents', async () => {
    const created = await world.t.request('POST', '/v1/retrievers', {
      key: world.t.adminKey, headers: { 'X-Namespace': 'contract' },
      body: { retriever_name: 'with-vectors', collection_identifiers: ['contract-docs'], input_schema: {}, stages: [search] },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const res = await world.t.request('POST', '/v1/retrievers/with-vectors/execute', { key: keys.alice, headers: { 'X-Namespace': 'contract' }, body: { inputs: {}, return_vectors: true } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const docs = res.body.documents as Doc[];
    expect(docs.length).toBe(4);
    for (const d of docs) {
      expect(d.payload.owner_principal).toBe('alice');
      expect(d.vectors!.text_embedding).toHaveLength(384);
    }
  });

  it("the vector seam gives a principal only the vectors of documents it may read", async () => {
    const source = world.t.kernel.services.get(DocumentSource);
    const { organizationId } = world.context(null, 0);
    const all = world.documents.map((d) => d.document_id);
    const read = (principalId: string | null, feature: string = CONTRACT_FEATURE_URI) =>
      source.vectors({ organizationId, collectionIds: [contractId, catalogId], feature, documentIds: all, principalId });
    expect((await read(null)).size).toBe(12);
    for (const principal of ['alice', 'bob']) {
      const own = world.documents.filter((d) => d.payload!.owner_principal === principal).map((d) => d.document_id);
      expect([...(await read(principal)).keys()].sort()).toEqual(own.sort());
    }
    expect((await read(null, 'tessera://text_extractor@1.0/nothing')).size).toBe(0);
    // a feature given as such reads its own index; one nothing was written to yet has none, which is no error
    const [feature] = await source.features(organizationId, [contractId]);
    expect((await source.vectors({ organizationId, collectionIds: [], feature: feature!, documentIds: all, principalId: 'bob' })).size).toBe(4);
    const unwritten = { ...feature!, index: 'v_unwritten__text_embedding' };
    expect((await source.vectors({ organizationId, collectionIds: [], feature: unwritten, documentIds: all, principalId: null })).size).toBe(0);
  });

  it('mmr and deduplicate by embedding give a user-scoped key only its own documents', async () => {
    for (const principal of ['alice', 'bob']) {
      for (const next of [stage('mmr', { feature_uri: CONTRACT_FEATURE_URI, top_k: 3, lambda: 0.2 }), stage('deduplicate', { feature_uri: CONTRACT_FEATURE_URI, threshold: 0.2 })]) {
        const docs = await execute([search, next], keys[principal]);
        expect(docs.length).toBeGreaterThan(0);
        for (const d of docs) expect(d.payload.owner_principal).toBe(principal);
      }
    }
  });

  it('mmr picks as maximal marginal relevance over the stored vectors would (computed here from return_vectors)', async () => {
    const found = await execute([search], world.t.adminKey, { return_vectors: true });
    const scores = found.map((d) => d.score!);
    const [min, max] = [Math.min(...scores), Math.max(...scores)];
    const lambda = 0.3;
    const expected: Doc[] = [];
    const left = [...found];
    while (expected.length < 5) {
      const value = (d: Doc) => lambda * (d.score! - min) / (max - min) - (expected.length === 0 ? 0 : (1 - lambda) * Math.max(...expected.map((p) => cosine(p.vectors!.text_embedding!, d.vectors!.text_embedding!))));
      const best = left.reduce((a, b) => (value(b) > value(a) ? b : a));
      expected.push(best);
      left.splice(left.indexOf(best), 1);
    }
    // diversity changes the order on this data (else the comparison below would prove little)
    expect(expected.map((d) => d.document_id)).not.toEqual(found.slice(0, 5).map((d) => d.document_id));
    const picked = await execute([search, stage('mmr', { feature_uri: CONTRACT_FEATURE_URI, lambda, top_k: 5 })]);
    expect(picked.map((d) => d.document_id)).toEqual(expected.map((d) => d.document_id));
    // relevance alone keeps the search order
    const relevanceOnly = await execute([search, stage('mmr', { feature_uri: CONTRACT_FEATURE_URI, lambda: 1, top_k: 5 })]);
    expect(relevanceOnly.map((d) => d.document_id)).toEqual(found.slice(0, 5).map((d) => d.document_id));
  });

  it('deduplicate by embedding drops what is at least threshold-similar to a kept, higher-ranked document', async () => {
    const found = await execute([search], world.t.adminKey, { return_vectors: true });
    const threshold = 0.2;
    const kept: Doc[] = [];
    for (const d of found) if (!kept.some((k) => cosine(k.vectors!.text_embedding!, d.vectors!.text_embedding!) >= threshold)) kept.push(d);
    expect(kept.length).toBeGreaterThan(1);
    expect(kept.length).toBeLessThan(found.length);
    const deduplicated = await execute([search, stage('deduplicate', { feature_uri: CONTRACT_FEATURE_URI, threshold })]);
    expect(deduplicated.map((d) => d.document_id)).toEqual(kept.map((d) => d.document_id));
  });

  it('a misnamed feature fails the execution naming the stage, not the request', async () => {
    const res = await run([search, stage('mmr', { feature_uri: 'tessera://text_extractor@9.9/nothing' }, 'diversify')]);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('failed');
    expect(res.body.error).toContain("Stage 'diversify' (mmr) failed");
    expect(res.body.error).toContain('tessera://text_extractor@9.9/nothing');
    expect(res.body.stage_statistics.stages.diversify.status).toBe('failed');
  });

  it("aggregates per group on a saved retriever, counting only the caller's own documents", async () => {
    const created = await world.t.request('POST', '/v1/retrievers', {
      key: world.t.adminKey, headers: { 'X-Namespace': 'contract' },
      body: {
        retriever_name: 'by-category', collection_identifiers: ['contract-docs'], input_schema: {},
        stages: [search, stage('aggregate', { group_by: 'category', aggregations: [{ function: 'count' }, { function: 'sum', field: 'price' }, { function: 'distinct', field: 'owner_principal', alias: 'owners' }, { function: 'distinct', field: 'document_id', alias: 'ids' }] })],
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const runAs = async (key: string) => {
      const res = await world.t.request('POST', '/v1/retrievers/by-category/execute', { key, headers: { 'X-Namespace': 'contract' }, body: { inputs: {} } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const docs = res.body.documents as Doc[];
      return new Map(docs.map((d) => [d.payload.group_key, d.payload.aggregations!]));
    };
    const fields = (i: number) => ({ category: i % 2 === 0 ? 'even' : 'odd', price: (i * 7) % 10, owner: ['alice', 'bob', null][i % 3]! });
    const expected = (owner?: string) => {
      const out = new Map<string, { count: number; sum_price: number }>();
      for (let i = 0; i < 12; i++) {
        const f = fields(i);
        if (owner && f.owner !== owner) continue;
        const g = out.get(f.category) ?? { count: 0, sum_price: 0 };
        out.set(f.category, { count: g.count + 1, sum_price: g.sum_price + f.price });
      }
      return out;
    };
    const admin = await runAs(world.t.adminKey);
    for (const [category, want] of expected()) expect(admin.get(category)).toMatchObject(want);
    expect(new Set((admin.get('even')!.owners as unknown[]))).toEqual(new Set(['alice', 'bob', null]));
    for (const principal of ['alice', 'bob']) {
      const mine = await runAs(keys[principal]!);
      expect(mine.size).toBe(expected(principal).size);
      for (const [category, want] of expected(principal)) {
        expect(mine.get(category)).toMatchObject(want);
        expect(mine.get(category)!.owners).toEqual([principal]);
        const ownIds = new Set(world.documents.filter((d) => d.payload!.owner_principal === principal).map((d) => d.document_id));
        for (const id of mine.get(category)!.ids as string[]) expect(ownIds.has(id)).toBe(true);
      }
    }
  });

  it('document_enrich joins from another collection, never another principal\'s document', async () => {
    const enrich = stage('document_enrich', { collection: 'catalog', source_field: 'chunk_index', target_field: 'chunk_index', fields: ['label', 'owner_mark'], output_field: 'catalog' });
    const admin = await execute([search, enrich]);
    expect(admin).toHaveLength(12);
    for (const d of admin) {
      const n = d.payload.fields.chunk_index as number;
      const joined = d.payload.fields.catalog as { label: string } | undefined;
      // the first match in document id order; every chunk_index has one
      expect(joined?.label).toMatch(new RegExp(`^label ${n} of `));
    }
    for (const principal of ['alice', 'bob']) {
      const docs = await execute([search, { ...enrich, config: { ...enrich.config, parameters: { ...enrich.config.parameters, collection: catalogId } } }], keys[principal]);
      expect(docs.length).toBeGreaterThan(0);
      for (const d of docs) {
        expect(d.payload.owner_principal).toBe(principal);
        const joined = d.payload.fields.catalog as { label: string; owner_mark: string } | undefined;
        if (joined) expect(joined.owner_mark).toBe(principal);
      }
      // alice owns labels 0 and 3, bob 1 and 3: their documents with those chunk indexes are joined, the rest are not
      const own = principal === 'alice' ? [0, 3] : [1, 3];
      for (const d of docs) expect(d.payload.fields.catalog !== undefined).toBe(own.includes(d.payload.fields.chunk_index as number));
      const dropped = await execute([search, { ...enrich, config: { ...enrich.config, parameters: { ...enrich.config.parameters, mode: 'drop' } } }], keys[principal]);
      expect(dropped.map((d) => d.payload.fields.chunk_index as number).every((n) => own.includes(n))).toBe(true);
    }
  });

  it("document_enrich refuses a collection the key's scopes cannot read: the execution fails naming the stage", async () => {
    const enrich = stage('document_enrich', { collection: 'catalog', source_field: 'chunk_index', target_field: 'chunk_index' }, 'join-catalog');
    const narrow = await newKey('narrow', { scopes: [{ resource_type: 'retriever', resource_id: '*' }, { resource_type: 'collection', resource_id: contractId }] });
    const refused = await run([search, enrich], narrow);
    expect(refused.status, JSON.stringify(refused.body)).toBe(200);
    expect(refused.body.status).toBe('failed');
    expect(refused.body.documents).toEqual([]);
    expect(refused.body.error).toContain("Stage 'join-catalog' (document_enrich) failed");
    expect(refused.body.error).toContain("collection 'catalog'");
    expect(refused.body.stage_statistics.stages['join-catalog'].status).toBe('failed');
    const wide = await newKey('wide', { scopes: [{ resource_type: 'retriever', resource_id: '*' }, { resource_type: 'collection', resource_id: contractId }, { resource_type: 'collection', resource_id: catalogId }] });
    expect((await execute([search, enrich], wide)).length).toBe(12);
    // an unknown collection fails the same way
    const missing = await run([search, stage('document_enrich', { collection: 'nowhere', source_field: 'chunk_index', target_field: 'chunk_index' })]);
    expect(missing.body.status).toBe('failed');
    expect(missing.body.error).toContain("'nowhere'");
  });
});
