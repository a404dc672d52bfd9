/**
 * The optimizer never changes results: random pipelines (seeded) run over HTTP on a collection of documents
 * with fields, text and vectors, once as written (`optimize: false`) and once optimized; documents, order,
 * scores and payloads must be identical, for the admin key and a user-scoped key. The generator leans toward
 * shapes the rules rewrite (a filter then a search, filters in a row, a relevance sort after a search, a
 * filter on a group key), mixed with stages the optimizer knows nothing about, and the test checks that the
 * optimizer did fire on a good share of them, every rule included.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../../../kernel/random.js';
import { VectorIndex } from '../../../kernel/tokens.js';
import { featureIndexName } from '../../../kernel/vectors/naming.js';
import { Documents } from '../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../support/kernel.js';
import { CONTRACT_DIMS, CONTRACT_FEATURE_URI, contractVector } from '../../support/stage-contract.js';

const WORDS = ['harbor', 'lamp', 'river', 'stone', 'bread', 'glacier', 'ship', 'valley', 'oven', 'night', 'salt', 'coast'];
const CATEGORIES = ['alpha', 'beta', 'Alpha', 'gamma', null];
const PRINCIPALS = ['alice', 'bob', null];
const DOCUMENTS = 90;
const PIPELINES = 160;

type Rand = () => number;
const pick = <T>(r: Rand, items: readonly T[]): T => items[Math.floor(r() * items.length)]!;
const int = (r: Rand, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

interface Stage {
  stage_name: string;
  config: { stage_id: string; parameters: Record<string, unknown> };
}

function condition(r: Rand): Record<string, unknown> {
  switch (int(r, 0, 6)) {
    case 0: return { field: 'category', operator: pick(r, ['eq', 'ne']), value: pick(r, CATEGORIES) };
    case 1: return { field: 'category', operator: 'in', value: [pick(r, CATEGORIES), pick(r, CATEGORIES)] };
    case 2: return { field: 'price', operator: pick(r, ['gt', 'gte', 'lt', 'lte']), value: int(r, 0, 9) };
    case 3: return { field: 'price', operator: pick(r, ['in', 'nin']), value: [int(r, 0, 9), int(r, 0, 9), int(r, 0, 9)] };
    case 4: return { field: 'text', operator: 'contains', value: pick(r, WORDS) };
    case 5: return { field: 'tag', operator: 'exists', value: r() < 0.7 };
    default: return { field: 'chunk_index', operator: pick(r, ['eq', 'ne', 'lte']), value: int(r, 0, 3) };
  }
}

function filter(r: Rand, field?: string): Record<string, unknown> {
  if (field === 'category') return { AND: [{ field: 'category', operator: pick(r, ['eq', 'ne', 'in']), value: r() < 0.5 ? pick(r, CATEGORIES) : ['alpha', 'beta'] }].map((c) => (c.operator === 'in' && !Array.isArray(c.value) ? { ...c, value: [c.value] } : c)) };
  if (field === 'price') return { OR: [{ field: 'price', operator: 'lte', value: int(r, 0, 9) }, { field: 'price', operator: 'exists', value: false }] };
  const shape = int(r, 0, 3);
  const f: Record<string, unknown> = shape === 0 ? { AND: [condition(r)] } : shape === 1 ? { AND: [condition(r), condition(r)] } : shape === 2 ? { OR: [condition(r), condition(r)] } : { NOT: [condition(r)] };
  if (r() < 0.15) f.case_sensitive = true;
  return f;
}

function vectorSearch(r: Rand): Record<string, unknown> {
  return { feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(int(r, 0, 300)) }, top_k: int(r, 2, 40) };
}

function search(r: Rand): { stage_id: string; parameters: Record<string, unknown> } {
  const kind = int(r, 0, 4);
  if (kind === 4) return { stage_id: 'text_search', parameters: { query: `${pick(r, WORDS)} ${pick(r, WORDS)}`, top_k: int(r, 2, 40) } };
  const searches = [vectorSearch(r)];
  if (kind >= 2) searches.push(r() < 0.5 ? vectorSearch(r) : { text_search: { query: pick(r, WORDS) }, top_k: int(r, 2, 40) });
  const parameters: Record<string, unknown> = { searches };
  if (kind >= 2) parameters.fusion = pick(r, ['rrf', 'dbsf', 'weighted', 'max']);
  if (r() < 0.3) parameters.pre_filters = filter(r);
  if (r() < 0.3) parameters.final_top_k = int(r, 2, 30);
  return { stage_id: 'feature_search', parameters };
}

function laterStage(r: Rand): { stage_id: string; parameters: Record<string, unknown> } {
  switch (int(r, 0, 13)) {
    case 0: case 1: case 2: return { stage_id: 'attribute_filter', parameters: { filters: filter(r) } };
    case 3: return { stage_id: 'sort_relevance', parameters: r() < 0.8 ? {} : { direction: 'asc' } };
    case 4: return { stage_id: 'sort_attribute', parameters: { field: pick(r, ['price', 'category', 'chunk_index', 'score', 'label']), direction: pick(r, ['asc', 'desc']) } };
    case 5: return { stage_id: 'limit', parameters: { limit: int(r, 1, 20), ...(r() < 0.3 ? { offset: int(r, 0, 5) } : {}) } };
    case 6: return { stage_id: 'group_by', parameters: { field: pick(r, ['category', 'price']), output_mode: pick(r, ['first', 'flatten', 'all']), max_per_group: int(r, 1, 4) } };
    case 7: return search(r);
    case 8: return { stage_id: 'feature_search', parameters: r() < 0.5 ? { pre_filters: filter(r) } : {} };
    case 9: return { stage_id: 'score_normalize', parameters: { method: pick(r, ['min_max', 'z_score', 'softmax', 'l2']) } };
    case 10: return { stage_id: 'deduplicate', parameters: { fields: [pick(r, ['category', 'price'])] } };
    case 11: return { stage_id: 'unwind', parameters: { field: 'labels', output_field: 'label' } };
    default: return { stage_id: 'sort_relevance', parameters: {} };
  }
}

/** A random pipeline, often shaped like what a rule rewrites. */
function pipeline(r: Rand): Stage[] {
  const out: Array<{ stage_id: string; parameters: Record<string, unknown> }> = [];
  switch (int(r, 0, 5)) {
    case 0: out.push({ stage_id: 'attribute_filter', parameters: { filters: filter(r) } }, search(r)); break;
    case 1: out.push(search(r), { stage_id: 'attribute_filter', parameters: { filters: filter(r) } }, { stage_id: 'attribute_filter', parameters: { filters: filter(r) } }); break;
    case 2: out.push(search(r), { stage_id: 'sort_relevance', parameters: {} }); break;
    case 3: {
      const field = pick(r, ['category', 'price']);
      out.push(search(r), { stage_id: 'group_by', parameters: { field, output_mode: pick(r, ['first', 'flatten', 'all']) } }, { stage_id: 'attribute_filter', parameters: { filters: filter(r, field) } });
      break;
    }
    case 4:
      // After an unwind, documents repeat: a sort before sort_relevance then decides the order of their ties.
      out.push(search(r), ...(r() < 0.3 ? [{ stage_id: 'unwind', parameters: { field: 'labels', output_field: 'label' } }] : []));
      out.push({ stage_id: 'sort_attribute', parameters: { field: pick(r, ['price', 'category', 'label']) } });
      out.push(r() < 0.5 ? { stage_id: 'sort_attribute', parameters: { field: 'price', direction: pick(r, ['asc', 'desc']) } } : { stage_id: 'sort_relevance', parameters: {} });
      break;
    default: out.push(r() < 0.3 ? { stage_id: 'attribute_filter', parameters: { filters: filter(r) } } : search(r));
  }
  const extra = int(r, 0, 3);
  for (let i = 0; i < extra; i++) out.splice(int(r, 1, out.length), 0, laterStage(r));
  return out.map((s, i) => ({ stage_name: `s${i}_${s.stage_id}`, config: s }));
}

describe('optimizer equivalence on random pipelines', () => {
  let t: TestKernel;
  let aliceKey: string;

  beforeAll(async () => {
    t = await startTestKernel({ config: { runTasks: false } });
    const organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
    const namespace = (await t.client().POST('/v1/namespaces', { body: { namespace_name: 'equiv' } })).data!;
    const api = (method: string, path: string, body: unknown) => t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': 'equiv' }, body });
    await api('POST', '/v1/buckets', { bucket_name: 'equiv-src' });
    const collection = (await api('POST', '/v1/collections/create', {
      collection_name: 'equiv-docs', source: { type: 'bucket', bucket_id: 'equiv-src' }, feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
    })).body as { collection_id: string };
    const index = featureIndexName(collection.collection_id, 'text_embedding');
    const vectors = t.kernel.services.get(VectorIndex);
    await vectors.ensureIndex({ name: index, dims: CONTRACT_DIMS, distance: 'cosine' });
    const r = seededRandom(2026);
    for (let i = 0; i < DOCUMENTS; i++) {
      const owner = PRINCIPALS[i % 3]!;
      const fields: Record<string, unknown> = {
        text: Array.from({ length: int(r, 3, 7) }, () => pick(r, WORDS)).join(' '),
        chunk_index: i % 4,
      };
      if (r() < 0.85) fields.price = int(r, 0, 9);
      const category = pick(r, CATEGORIES);
      if (category !== null || r() < 0.5) fields.category = category;
      if (r() < 0.6) fields.tag = pick(r, WORDS);
      fields.labels = Array.from({ length: int(r, 0, 3) }, () => pick(r, WORDS));
      const row = await t.kernel.services.get(Documents).upsert({
        organizationId, namespaceId: namespace.namespace_id, collectionId: collection.collection_id, sourceKey: `equiv:${i}`,
        rootObjectId: `obj_${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0, fields, ownerPrincipal: owner,
      });
      // A few near-duplicate vectors give equal scores, so ties are exercised too.
      await vectors.upsert(index, [{
        id: row.document_id, vector: contractVector(i % 7 === 0 ? 1000 : i),
        payload: { organization_id: organizationId, namespace_id: namespace.namespace_id, collection_id: collection.collection_id, document_id: row.document_id,
          root_object_id: row.root_object_id, source_document_id: null, processing_tier: 0, owner_principal: owner, fields: row.fields },
      }]);
    }
    aliceKey = (await t.request('POST', `/v1/organizations/users/${t.adminEmail}/api-keys`, {
      key: t.adminKey, body: { name: 'alice', principal_id: 'alice', permissions: ['read'] },
    })).body.key;
  }, 180_000);
  afterAll(async () => {
    await t?.stop();
  });

  const execute = async (stages: unknown[], optimize: boolean, key = t.adminKey) => {
    const res = await t.request('POST', '/v1/retrievers/execute', {
      key, headers: { 'X-Namespace': 'equiv' },
      body: { collection_identifiers: ['equiv-docs'], input_schema: {}, inputs: {}, stages, pagination: { limit: 1000 }, optimize },
    });
    expect(res.status, JSON.stringify({ stages, body: res.body })).toBe(200);
    return res.body as { status: string; error: string | null; documents: unknown[]; optimization_applied: boolean; optimization_summary?: { rules_applied: string[] } };
  };

  it('keeps the order of repeated documents (after unwind) that a sort before sort_relevance decided', async () => {
    const stages = [
      { stage_name: 'search', config: { stage_id: 'feature_search', parameters: { searches: [{ feature_uri: CONTRACT_FEATURE_URI, query: { vector: contractVector(5) }, top_k: 20 }] } } },
      { stage_name: 'labels', config: { stage_id: 'unwind', parameters: { field: 'labels', output_field: 'label' } } },
      { stage_name: 'by_label', config: { stage_id: 'sort_attribute', parameters: { field: 'label', direction: 'desc' } } },
      { stage_name: 'by_score', config: { stage_id: 'sort_relevance', parameters: {} } },
    ];
    const plain = await execute(stages, false);
    const fast = await execute(stages, true);
    expect(plain.status).toBe('completed');
    expect(plain.documents.length).toBeGreaterThan(20);
    expect(fast.documents).toEqual(plain.documents);
  });

  it('gives identical documents, order and scores with and without the optimizer', async () => {
    const r = seededRandom(7);
    const fired = new Map<string, number>();
    let optimized = 0;
    let completed = 0;
    for (let n = 0; n < PIPELINES; n++) {
      const stages = pipeline(r);
      const key = n % 4 === 3 ? aliceKey : t.adminKey;
      const run = (optimize: boolean) => execute(stages, optimize, key);
      const plain = await run(false);
      const fast = await run(true);
      // Query vectors are long: the failure message shows their first numbers.
      const context = JSON.stringify({ n, stages, rules: fast.optimization_summary?.rules_applied, plainError: plain.error, fastError: fast.error }, (_k, v: unknown) => (Array.isArray(v) && v.length > 8 ? [...v.slice(0, 3), `… ${v.length} numbers`] : v));
      expect(plain.optimization_applied, context).toBe(false);
      expect(plain.optimization_summary, context).toBeUndefined();
      if (fast.optimization_applied) {
        optimized += 1;
        for (const rule of fast.optimization_summary!.rules_applied) fired.set(rule, (fired.get(rule) ?? 0) + 1);
      } else {
        expect(fast.optimization_summary, context).toBeUndefined();
      }
      // A first-stage filter over its limit may only fail without the optimizer (see optimizer.ts); none is here.
      expect(fast.status, context).toBe(plain.status);
      if (plain.status !== 'completed') continue;
      completed += 1;
      expect(fast.documents, context).toEqual(plain.documents);
    }
    if (process.env.OPTIMIZER_EQUIVALENCE_REPORT) console.log({ pipelines: PIPELINES, completed, optimized, fired: Object.fromEntries(fired) });
    expect(completed).toBeGreaterThan(PIPELINES * 0.8);
    expect(optimized).toBeGreaterThan(PIPELINES * 0.4);
    for (const rule of ['push_down_filters', 'group_by_push_down', 'merge_consecutive_filters', 'eliminate_redundant_sorts']) {
      expect(fired.get(rule) ?? 0, `${rule} fired: ${JSON.stringify([...fired])}`).toBeGreaterThan(3);
    }
  }, 300_000);
});
