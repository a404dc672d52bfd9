/**
 * The contract every retriever stage passes (`runStageContract(stage, fixtures)`): its parameters are a
 * valid JSON Schema that accepts the fixture's good parameters and rejects the bad ones; it registers; it
 * runs on empty input (a later stage never invents documents); it keeps each document's id and collection;
 * as the first stage of a pipeline it never returns a document another principal owns; and the same run
 * gives the same documents in the same order.
 *
 * The world it runs in is a real kernel: a collection indexing `text_extractor`'s `text_embedding`, with
 * documents owned by `alice`, by `bob` and by nobody, written with their vectors the way processing writes
 * them (same index names, same payload fields).
 */
import { Ajv } from 'ajv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { PluginRegistry, type StageContext, type StageDocument, type StagePlugin } from '../../kernel/plugins.js';
import { DocumentSource, VectorIndex } from '../../kernel/tokens.js';
import { featureIndexName } from '../../kernel/vectors/naming.js';
import { Documents } from '../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from './kernel.js';

export const CONTRACT_FEATURE_URI = 'tessera://text_extractor@1.0/text_embedding';
export const CONTRACT_DIMS = 384;
const PRINCIPALS = ['alice', 'bob', null] as const;

/** A deterministic unit vector for a seed (documents and queries of the contract world). */
export function contractVector(seed: number): number[] {
  const v = Array.from({ length: CONTRACT_DIMS }, (_, i) => Math.sin((seed + 1) * (i + 1) * 0.37) + (i % (seed + 2) === 0 ? 1 : 0));
  const norm = Math.hypot(...v);
  return v.map((x) => x / norm);
}

export interface StageContractFixtures<P> {
  /** Parameters the schema must accept; the first is what the runs use. */
  valid: readonly P[];
  /** Parameters the schema must refuse. */
  invalid: readonly unknown[];
  /**
   * The stage returns synthetic result documents (e.g. aggregates) besides or instead of stored ones: an id
   * no stored document has, no collection, and nothing naming a document the caller may not read. They may
   * come out of empty input (an aggregate's count of 0).
   */
  synthetic?: boolean;
}

export interface StageWorld {
  t: TestKernel;
  /** Every document of the world, as the first stage of a pipeline would read them (admin view). */
  documents: StageDocument[];
  context(principalId: string | null, stageIndex: number): StageContext;
}

export interface StageWorldOptions {
  /** Model plugin modules for one spawned inference worker (stages that call models). */
  inferencePlugins?: readonly string[];
}

/** Starts the contract world (one kernel per test file; stop it with `world.t.stop()`). */
export async function startStageWorld(options: StageWorldOptions = {}): Promise<StageWorld> {
  const t = await startTestKernel(
    options.inferencePlugins
      ? { inferencePlugins: options.inferencePlugins, config: { runTasks: false, inferenceWorkers: 1 } }
      : { config: { runTasks: false } },
  );
  const organizationId = organizationMe((await t.client().GET('/v1/me', {})).data).organization.organization_id;
  const namespace = (await t.client().POST('/v1/namespaces', { body: { namespace_name: 'contract' } })).data!;
  const api = (method: string, path: string, body: unknown) => t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': 'contract' }, body });
  await api('POST', '/v1/buckets', { bucket_name: 'contract-src' });
  const collection = (await api('POST', '/v1/collections/create', {
    collection_name: 'contract-docs',
    source: { type: 'bucket', bucket_id: 'contract-src' },
    feature_extractors: [{ feature_extractor_name: 'text_extractor' }],
  })).body as { collection_id: string; collection_name: string };
  const index = featureIndexName(collection.collection_id, 'text_embedding');
  const vectors = t.kernel.services.get(VectorIndex);
  await vectors.ensureIndex({ name: index, dims: CONTRACT_DIMS, distance: 'cosine' });
  for (let i = 0; i < 12; i++) {
    const owner = PRINCIPALS[i % 3]!;
    const row = await t.kernel.services.get(Documents).upsert({
      organizationId, namespaceId: namespace.namespace_id, collectionId: collection.collection_id, sourceKey: `contract:${i}`,
      rootObjectId: `obj_${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
      fields: { text: `document ${i}`, chunk_index: i % 4, price: (i * 7) % 10, category: i % 2 === 0 ? 'even' : 'odd' },
      ownerPrincipal: owner,
    });
    await vectors.upsert(index, [{
      id: row.document_id, vector: contractVector(i),
      payload: { organization_id: organizationId, namespace_id: namespace.namespace_id, collection_id: collection.collection_id, document_id: row.document_id,
        root_object_id: row.root_object_id, source_document_id: null, processing_tier: 0, owner_principal: owner, fields: row.fields },
    }]);
  }
  const documents = await t.kernel.services.get(DocumentSource).list({ organizationId, collectionIds: [collection.collection_id], principalId: null, limit: 100 });
  const log = pino({ level: 'silent' });
  return {
    t,
    documents,
    context: (principalId, stageIndex) => ({
      organizationId,
      namespace: { id: namespace.namespace_id, name: namespace.namespace_name },
      collections: [{ collection_id: collection.collection_id, collection_name: collection.collection_name, namespace_id: namespace.namespace_id }],
      inputs: {},
      budget: { maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0 },
      principalId,
      stageIndex,
      // The world's admin may read every collection of the namespace (scope checks are the engine's, tested there).
      resolveCollections: (identifiers) => t.kernel.services.get(DocumentSource).resolveCollections(organizationId, namespace.namespace_id, identifiers),
      log,
      container: t.kernel.container,
    }),
  };
}

const ids = (docs: readonly StageDocument[]) => docs.map((d) => d.document_id);

export function runStageContract<P>(stage: StagePlugin<P>, fixtures: StageContractFixtures<P>, worldOptions: StageWorldOptions = {}): void {
  describe(`stage contract: ${stage.id}`, () => {
    let world: StageWorld;
    const params = () => structuredClone(fixtures.valid[0]!) as P;

    beforeAll(async () => {
      world = await startStageWorld(worldOptions);
    }, 120_000);
    afterAll(async () => {
      await world?.t.stop();
    });

    it('declares a valid JSON Schema that accepts good parameters and refuses bad ones, and registers', () => {
      const ajv = new Ajv({ strict: false, allErrors: true, useDefaults: true });
      const validate = ajv.compile(stage.parameters as object);
      for (const good of fixtures.valid) expect(validate(structuredClone(good)), JSON.stringify(validate.errors)).toBe(true);
      expect(fixtures.invalid.length).toBeGreaterThan(0);
      for (const bad of fixtures.invalid) expect(validate(structuredClone(bad)), JSON.stringify(bad)).toBe(false);
      expect(() => new PluginRegistry().add(stage, 'contract')).not.toThrow();
      expect(['filter', 'sort', 'reduce', 'group', 'apply', 'enrich']).toContain(stage.type);
      expect(stage.description.length).toBeGreaterThan(10);
    });

    const known = () => new Map(world.documents.map((d) => [d.document_id, d.collection_id]));
    /** A synthetic result: not a stored document's id, no collection. */
    const expectSynthetic = (doc: StageDocument) => {
      expect(fixtures.synthetic, `unknown document ${doc.document_id}`).toBe(true);
      expect(known().has(doc.document_id)).toBe(false);
      expect(doc.collection_id).toBeUndefined();
    };

    it('runs on empty input and invents nothing after an earlier stage', async () => {
      const out = await stage.run(world.context(null, 1), [], params());
      if (fixtures.synthetic) out.forEach(expectSynthetic);
      else expect(out).toEqual([]);
    });

    it('keeps document ids and collections', async () => {
      const collections = known();
      for (const stageIndex of [0, 1]) {
        const out = await stage.run(world.context(null, stageIndex), stageIndex === 0 ? [] : structuredClone(world.documents), params());
        for (const doc of out) {
          if (!collections.has(doc.document_id)) {
            expectSynthetic(doc);
            continue;
          }
          expect(doc.collection_id).toBe(collections.get(doc.document_id));
        }
      }
    });

    it("never returns another principal's document, as the first stage or later", async () => {
      for (const principal of ['alice', 'bob']) {
        const foreign = world.documents.filter((d) => d.payload?.owner_principal !== principal).map((d) => d.document_id);
        const check = (doc: StageDocument) => {
          if (fixtures.synthetic && !known().has(doc.document_id)) {
            expectSynthetic(doc);
            const text = JSON.stringify(doc);
            for (const id of foreign) expect(text).not.toContain(id);
          } else expect(doc.payload?.owner_principal).toBe(principal);
        };
        (await stage.run(world.context(principal, 0), [], params())).forEach(check);
        const visible = world.documents.filter((d) => d.payload?.owner_principal === principal);
        (await stage.run(world.context(principal, 1), structuredClone(visible), params())).forEach(check);
      }
    });

    it('is deterministic', async () => {
      for (const stageIndex of [0, 1]) {
        const input = stageIndex === 0 ? [] : world.documents;
        const a = await stage.run(world.context(null, stageIndex), structuredClone(input), params());
        const b = await stage.run(world.context(null, stageIndex), structuredClone(input), params());
        expect(ids(b)).toEqual(ids(a));
        expect(b.map((d) => d.score ?? null)).toEqual(a.map((d) => d.score ?? null));
      }
    });
  });
}
