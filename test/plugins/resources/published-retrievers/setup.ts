/** A kernel with one namespace, one collection of six documents and helpers to publish retrievers over it. */
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type RawResponse, type TestKernel, organizationMe } from '../../../support/kernel.js';

export const NS = 'storefront';

export interface PublishedFixture {
  t: TestKernel;
  organizationId: string;
  namespaceId: string;
  collectionId: string;
  /** Owner-side request (admin key, X-Namespace). */
  api(method: string, path: string, body?: unknown): Promise<RawResponse>;
  /** Public request: no Authorization header. */
  anon(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<RawResponse>;
  /** Saves a retriever over the collection (`n <= inputs.n`). */
  retriever(name: string): Promise<string>;
  /** Every value a public response must never show (ids, keys, passwords, unexposed field values). */
  secrets: Set<string>;
}

export const SECRET_NOTE = 'internal-note-9f3a7c';

export async function startPublishedFixture(config: { signingSecret?: string } = {}): Promise<PublishedFixture> {
  const t = await startTestKernel({ config: { runTasks: false, ...config } });
  const me = (await t.client().GET('/v1/me', {})).data!;
  const organizationId = organizationMe(me).organization.organization_id;
  const api = (method: string, path: string, body?: unknown) =>
    t.request(method, path, { key: t.adminKey, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });
  const anon = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    t.request(method, path, { headers, ...(body !== undefined ? { body } : {}) });
  const ns = await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
  await api('POST', '/v1/buckets', { bucket_name: 'src' });
  const collection = (await api('POST', '/v1/collections/create', { collection_name: 'things', source: { type: 'bucket', bucket_id: 'src' } })).body;
  for (let i = 0; i < 6; i++) {
    await t.kernel.services.get(Documents).upsert({
      organizationId, namespaceId: collection.namespace_id, collectionId: collection.collection_id, sourceKey: `k${i}`,
      rootObjectId: `obj_${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
      fields: {
        n: i, title: `Lamp ${i}`, price: i * 10, internal_note: `${SECRET_NOTE}-${i}`,
        image: { storage_key: `${organizationId}/${collection.namespace_id}/objects/lamp-${i}.png`, content_type: 'image/png', filename: `lamp-${i}.png` },
      },
    });
  }
  const secrets = new Set<string>([t.adminKey, organizationId, ns.data!.namespace_id, collection.collection_id, t.adminEmail, SECRET_NOTE]);
  return {
    t, organizationId, namespaceId: ns.data!.namespace_id, collectionId: collection.collection_id, api, anon, secrets,
    async retriever(name) {
      const created = await api('POST', '/v1/retrievers', {
        retriever_name: name,
        collection_identifiers: ['things'],
        input_schema: { n: { type: 'number', required: true } },
        stages: [{ stage_name: 'filter', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'n', operator: 'lte', value: '{{inputs.n}}' }] } } } }],
      });
      if (created.status !== 201) throw new Error(created.text);
      secrets.add(created.body.retriever.retriever_id);
      return created.body.retriever.retriever_id as string;
    },
  };
}
