/**
 * A stage context over a fixed set of vectors, for the edge cases of stages that compare documents by
 * their vectors (mmr, deduplicate by embedding): the DocumentSource knows one feature and returns the
 * vectors given here. The real source (principal filter, index reads) is exercised through HTTP tests.
 */
import { Container } from 'inversify';
import pino from 'pino';
import type { StageContext, StageDocument } from '../../kernel/plugins.js';
import type { DocumentSource as DocumentSourceShape, DocumentVectorQuery, RetrievalFeature } from '../../kernel/retrieval/documents.js';
import { DocumentSource } from '../../kernel/tokens.js';

export const FAKE_FEATURE_URI = 'tessera://fake_extractor@1.0/embedding';
export const FAKE_COLLECTION = 'col_fake';

export function vectorStageContext(vectors: Record<string, number[]>): StageContext & { reads: DocumentVectorQuery[] } {
  const feature: RetrievalFeature = {
    collection_id: FAKE_COLLECTION, feature: 'embedding', feature_uri: FAKE_FEATURE_URI, extractor: 'fake_extractor', extractor_version: '1.0',
    index: 'v_fake__embedding', dims: 2, distance: 'cosine', model: 'fake', task: null,
  };
  const reads: DocumentVectorQuery[] = [];
  const source: DocumentSourceShape = {
    resolveCollections: async () => [],
    list: async () => [],
    count: async () => 0,
    getByIds: async () => [],
    features: async () => [feature],
    vectors: async (query) => {
      reads.push(query);
      if (query.feature !== FAKE_FEATURE_URI && query.feature !== feature) return new Map();
      return new Map(query.documentIds.flatMap((id) => (vectors[id] ? [[id, vectors[id]!] as const] : [])));
    },
  };
  const container = new Container();
  container.bind(DocumentSource).toConstantValue(source);
  return {
    organizationId: 'org_fake',
    namespace: { id: 'ns_fake', name: 'fake' },
    collections: [{ collection_id: FAKE_COLLECTION, collection_name: 'fake', namespace_id: 'ns_fake' }],
    stageIndex: 1,
    inputs: {},
    budget: { maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0 },
    principalId: null,
    log: pino({ level: 'silent' }),
    container,
    reads,
  };
}

export const doc = (id: string, score?: number, fields: Record<string, unknown> = {}): StageDocument => ({
  document_id: id, collection_id: FAKE_COLLECTION, ...(score === undefined ? {} : { score }), payload: { fields },
});

export const ids = (docs: readonly StageDocument[]) => docs.map((d) => d.document_id);
