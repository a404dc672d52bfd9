import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';

describe('collections', () => {
  let t: TestKernel;
  let bucketId: string;
  beforeAll(async () => {
    t = await startTestKernel();
    await t.client().POST('/v1/namespaces', { body: { namespace_name: 'library' } });
    await t.client().POST('/v1/namespaces', { body: { namespace_name: 'elsewhere' } });
    bucketId = (await api('POST', '/v1/buckets', { bucket_name: 'books' })).body.bucket_id;
  });
  afterAll(async () => {
    await t.stop();
  });

  function api(method: string, path: string, body?: unknown, namespace: string | null = 'library') {
    return t.request(method, path, {
      key: t.adminKey,
      ...(namespace ? { headers: { 'X-Namespace': namespace } } : {}),
      ...(body !== undefined ? { body } : {}),
    });
  }

  it('lists every extractor with its parameters, inputs, outputs and feature URIs', async () => {
    const res = await api('GET', '/v1/collections/features/extractors', undefined, null);
    expect(res.status).toBe(200);
    const passthrough = res.body.results.find((e: { name: string }) => e.name === 'passthrough_extractor');
    expect(passthrough).toMatchObject({ version: '1.0', inputs: [], outputs: { features: [] } });
    expect(passthrough.parameters.properties.fields).toBeDefined();
  });

  it('lists the text extractor with its feature URI, and records it (mapped) in a collection\'s output schema', async () => {
    const listed = (await api('GET', '/v1/collections/features/extractors', undefined, null)).body.results;
    const text = listed.find((e: { name: string }) => e.name === 'text_extractor');
    expect(text.outputs.features).toEqual([
      expect.objectContaining({ name: 'text_embedding', dims: 384, distance: 'cosine', uri: 'tessera://text_extractor@1.0/text_embedding' }),
    ]);
    expect(text.inputs).toEqual([expect.objectContaining({ name: 'text', type: 'text', required: true })]);
    const created = await api('POST', '/v1/collections/create', {
      collection_name: 'book-chunks',
      source: { type: 'bucket', bucket_id: 'books' },
      feature_extractors: [
        {
          feature_extractor_name: 'text_extractor',
          input_mapping: { text: 'content' },
          output_mapping: { text_embedding: 'embedding' },
          parameters: { split_by: 'sentences', chunk_size: 3 },
        },
      ],
    });
    expect(created.status).toBe(201);
    expect(created.body.output_schema.properties.embedding['x-feature']).toMatchObject({ dims: 384, uri: 'tessera://text_extractor@1.0/text_embedding' });
    expect(created.body.output_schema.properties.chunk_index).toBeDefined();
    const badInput = await api('POST', '/v1/collections/create', {
      collection_name: 'bad-chunks',
      source: { type: 'bucket', bucket_id: 'books' },
      feature_extractors: [{ feature_extractor_name: 'text_extractor', input_mapping: { body: 'content' } }],
    });
    expect(badInput.status).toBe(422);
    expect(badInput.body.detail[0].loc).toEqual(['body', 'feature_extractors', 0, 'input_mapping', 'body']);
    expect((await api('DELETE', '/v1/collections/book-chunks')).status).toBe(200);
  });

  it('creates a bucket-sourced collection with recorded versions, defaults, lineage and output schema', async () => {
    const res = await api('POST', '/v1/collections/create', {
      collection_name: 'book-pages',
      source: { type: 'bucket', bucket_id: 'books', prefix_key: 'fiction/', filters: { AND: [{ field: 'metadata.lang', operator: 'eq', value: 'en' }] } },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor', parameters: { exclude: ['secret'] } }],
    });
    expect(res.status).toBe(201);
    expect(res.body.collection_id).toMatch(/^col_/);
    expect(res.body).toMatchObject({
      status: 'DONE',
      enabled: true,
      document_count: 0,
      source: { type: 'bucket', bucket_id: bucketId, prefix_key: 'fiction/' },
      feature_extractors: [
        { feature_extractor_name: 'passthrough_extractor', version: '1.0', document_output_handling: 'create_new', document_output_type: 'single' },
      ],
      cache_config: { enabled: false, ttl_seconds: 604800, invalidation_strategy: 'replace_if_better', max_entries_per_key: 5 },
    });
    expect(res.body.source_lineage).toHaveLength(1);
    expect(res.body.source_lineage[0]).toMatchObject({ source_type: 'bucket', bucket_id: bucketId, bucket_config: { bucket_name: 'books' } });
    expect(Object.keys(res.body.output_schema.properties)).toEqual(
      expect.arrayContaining(['document_id', 'root_object_id', 'source_collection_id', 'source_document_id', 'processing_tier']),
    );
  });

  it('chains a collection on a collection (tier 1) and finds the namespace of a source given by id', async () => {
    const parent = (await api('GET', '/v1/collections/book-pages')).body;
    const child = await api('POST', '/v1/collections/create', { collection_name: 'book-summaries', source: { type: 'collection', collection_id: parent.collection_id } }, null);
    expect(child.status).toBe(201);
    expect(child.body.namespace_id).toBe(parent.namespace_id);
    expect(child.body.source_lineage.map((l: { source_type: string }) => l.source_type)).toEqual(['bucket', 'collection']);
    const byIdWithoutNamespace = await api('POST', '/v1/collections/create', { collection_name: 'by-id', source: { type: 'bucket', bucket_id: bucketId } }, null);
    expect(byIdWithoutNamespace.status).toBe(201);
    const byNameWithoutNamespace = await api('POST', '/v1/collections/create', { collection_name: 'by-name', source: { type: 'bucket', bucket_id: 'books' } }, null);
    expect(byNameWithoutNamespace.status).toBe(400);
  });

  it('refuses unknown sources, unknown extractors, bad parameters and mismatched source fields, writing nothing', async () => {
    const before = (await api('GET', '/v1/collections')).body.total;
    expect((await api('POST', '/v1/collections/create', { collection_name: 'x1', source: { type: 'bucket', bucket_id: 'nope' } })).status).toBe(404);
    expect((await api('POST', '/v1/collections/create', { collection_name: 'x1', source: { type: 'bucket', bucket_id: 'books' } }, 'elsewhere')).status).toBe(404);
    const unknown = await api('POST', '/v1/collections/create', {
      collection_name: 'x2',
      source: { type: 'bucket', bucket_id: 'books' },
      feature_extractors: [{ feature_extractor_name: 'nope_extractor' }],
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail[0].loc).toEqual(['body', 'feature_extractors', 0, 'feature_extractor_name']);
    const badParams = await api('POST', '/v1/collections/create', {
      collection_name: 'x3',
      source: { type: 'bucket', bucket_id: 'books' },
      feature_extractors: [{ feature_extractor_name: 'passthrough_extractor', parameters: { fields: 'all' }, version: '9.9' }],
    });
    expect(badParams.status).toBe(422);
    expect(badParams.body.detail.map((d: { loc: unknown[] }) => d.loc)).toEqual(
      expect.arrayContaining([
        ['body', 'feature_extractors', 0, 'version'],
        ['body', 'feature_extractors', 0, 'parameters', 'fields'],
      ]),
    );
    const mismatch = await api('POST', '/v1/collections/create', { collection_name: 'x4', source: { type: 'bucket', collection_id: 'col_x' } });
    expect(mismatch.status).toBe(422);
    const badFilter = await api('POST', '/v1/collections/create', {
      collection_name: 'x5',
      source: { type: 'bucket', bucket_id: 'books', filters: { AND: [{ field: 'a', operator: 'almost', value: 1 }] } },
    });
    expect(badFilter.status).toBe(422);
    expect((await api('GET', '/v1/collections')).body.total).toBe(before);
  });

  it('refuses an input_mapping to a field the source cannot have (422 naming it); a bucket without a schema may have any', async () => {
    const shelved = await api('POST', '/v1/buckets', {
      bucket_name: 'shelved',
      schema: { properties: { title: { type: 'string' }, content: { type: 'text' } } },
    });
    expect(shelved.status).toBe(201);
    const create = (name: string, source: Record<string, unknown>, extractor: string, inputMapping: Record<string, string>) =>
      api('POST', '/v1/collections/create', {
        collection_name: name,
        source,
        feature_extractors: [{ feature_extractor_name: extractor, input_mapping: inputMapping }],
      });

    const impossible = await create('shelved-chunks', { type: 'bucket', bucket_id: 'shelved' }, 'text_extractor', { text: 'body' });
    expect(impossible.status).toBe(422);
    expect(impossible.body.detail).toEqual([
      expect.objectContaining({ loc: ['body', 'feature_extractors', 0, 'input_mapping', 'text'], type: 'unknown_source_field', msg: expect.stringMatching(/'body'.*title, content/) }),
    ]);
    expect((await api('GET', '/v1/collections/shelved-chunks')).status).toBe(404);

    const fine = await create('shelved-chunks', { type: 'bucket', bucket_id: 'shelved' }, 'text_extractor', { text: 'title' });
    expect(fine.status, JSON.stringify(fine.body)).toBe(201);
    expect((await create('shelved-blobs', { type: 'bucket', bucket_id: 'shelved' }, 'text_extractor', { text: 'content.storage_key' })).status).toBe(201);
    // `books` has no schema: its objects may have any field.
    expect((await create('books-anything', { type: 'bucket', bucket_id: 'books' }, 'text_extractor', { text: 'whatever' })).status).toBe(201);

    // A collection source has the fields of its output schema, and document metadata as metadata.<name>.
    const chained = await create('shelved-rechunked', { type: 'collection', collection_id: 'shelved-chunks' }, 'text_extractor', { text: 'summary' });
    expect(chained.status).toBe(422);
    expect(chained.body.detail[0]).toMatchObject({ loc: ['body', 'feature_extractors', 0, 'input_mapping', 'text'], type: 'unknown_source_field' });
    expect(chained.body.detail[0].msg).toContain('metadata.<name>');
    expect((await create('shelved-rechunked', { type: 'collection', collection_id: 'shelved-chunks' }, 'text_extractor', { text: 'text' })).status).toBe(201);
    expect((await create('shelved-by-note', { type: 'collection', collection_id: 'shelved-chunks' }, 'text_extractor', { text: 'metadata.note' })).status).toBe(201);
    // A passthrough collection's documents carry whatever their source had: any field.
    expect((await create('books-copies', { type: 'bucket', bucket_id: 'books' }, 'passthrough_extractor', {})).status).toBe(201);
    expect((await create('books-copies-text', { type: 'collection', collection_id: 'books-copies' }, 'text_extractor', { text: 'anything' })).status).toBe(201);
    for (const name of ['books-copies-text', 'books-copies', 'shelved-by-note', 'shelved-rechunked', 'books-anything', 'shelved-blobs', 'shelved-chunks']) {
      expect((await api('DELETE', `/v1/collections/${name}?force=true`)).status).toBe(200);
    }
  });

  it('updates the mutable fields only, keeps names unique, and reaches a collection named like a route', async () => {
    const updated = await api('PATCH', '/v1/collections/by-id', { description: 'now described', enabled: false, cache_config: { enabled: true } });
    expect(updated.status).toBe(200);
    expect(updated.body).toMatchObject({ description: 'now described', enabled: false, cache_config: { enabled: true, ttl_seconds: 604800 } });
    expect((await api('PATCH', '/v1/collections/by-id', { source: { type: 'bucket', bucket_id: 'books' } })).status).toBe(422);
    expect((await api('PATCH', '/v1/collections/by-id', {})).status).toBe(400);
    expect((await api('PATCH', '/v1/collections/by-id', { collection_name: 'BOOK-PAGES' })).status).toBe(409);
    const named = await api('POST', '/v1/collections/create', { collection_name: 'create', source: { type: 'bucket', bucket_id: 'books' } });
    expect(named.status).toBe(201);
    expect((await api('GET', '/v1/collections/create')).body.collection_id).toBe(named.body.collection_id);
  });

  it('guards the deletion of a bucket or collection that collections read from', async () => {
    const bucket = await api('DELETE', '/v1/buckets/books');
    expect(bucket.status).toBe(409);
    expect(bucket.body.error.message).toMatch(/collection 'book-pages'/);
    const parent = await api('DELETE', '/v1/collections/book-pages');
    expect(parent.status).toBe(409);
    expect((await api('DELETE', '/v1/collections/book-summaries')).status).toBe(200);
    expect((await api('DELETE', '/v1/collections/book-pages')).status).toBe(200);
    expect((await api('GET', '/v1/collections/book-pages')).status).toBe(404);
  });
});
