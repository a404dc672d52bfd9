/** `collections` (list, get, create, delete) and `extractors` (the catalogue a collection picks from). */
import type { Command } from 'commander';
import { CliError } from './errors.js';
import { call, clientCommand, clientOf, collect, jsonFlag, namespaceOf, type ClientOptions } from './context.js';
import { emit, printFields, printTable } from './output.js';

type ExtractorConfig = { feature_extractor_name: string; parameters?: Record<string, unknown> };

/** --extractor names and --extractor-json configs as the request's feature_extractors. */
export function extractorConfigs(names: readonly string[], configs: readonly unknown[], parameters?: Record<string, unknown>): ExtractorConfig[] {
  const out: ExtractorConfig[] = names.map((name) => ({ feature_extractor_name: name, ...(parameters ? { parameters } : {}) }));
  for (const config of configs) out.push(config as ExtractorConfig);
  return out;
}

export function registerCollections(program: Command): void {
  const collections = program.command('collections').description('Collections: documents extracted from a bucket (or another collection)');
  clientCommand(collections, 'list', 'List the namespace’s collections')
    .option('--limit <n>', 'at most this many', (v) => Number(v))
    .option('--offset <n>', 'skip this many', (v) => Number(v))
    .action(async (o: ClientOptions & { limit?: number; offset?: number }) => {
      const page = await call(
        o,
        clientOf(o).GET('/v1/collections', {
          params: { header: { 'X-Namespace': namespaceOf(o) }, query: { ...(o.limit ? { limit: o.limit } : {}), ...(o.offset ? { offset: o.offset } : {}) } },
        }),
      );
      emit(o, page, (p) =>
        printTable(p.results, [
          { header: 'name', value: (c) => c.collection_name },
          { header: 'id', value: (c) => c.collection_id },
          { header: 'source', value: (c) => `${c.source.type}:${c.source.bucket_id ?? c.source.collection_id ?? ''}` },
          { header: 'extractors', value: (c) => c.feature_extractors.map((f) => f.feature_extractor_name).join(',') },
          { header: 'documents', value: (c) => c.document_count, right: true },
          { header: 'status', value: (c) => c.status },
        ], `${p.total} collection(s)`),
      );
    });
  clientCommand(collections, 'get', 'Show one collection')
    .argument('<collection>', 'name or col_ id')
    .action(async (collection: string, o: ClientOptions) => {
      const found = await call(
        o,
        clientOf(o).GET('/v1/collections/{collection_identifier}', {
          params: { header: { 'X-Namespace': namespaceOf(o) }, path: { collection_identifier: collection } },
        }),
      );
      emit(o, found, (c) =>
        printFields(c, [
          'collection_name', 'collection_id', 'description', 'source',
          ['extractors', c.feature_extractors.map((f) => `${f.feature_extractor_name}${f.version ? `@${f.version}` : ''}`).join(', ')],
          'enabled', 'status', 'document_count', ['output_fields', Object.keys(c.output_schema.properties).join(', ')], 'created_at',
        ]),
      );
    });
  clientCommand(collections, 'create', 'Create a collection that reads a bucket (or a collection) through extractors')
    .argument('<name>')
    .option('--bucket <bucket>', 'the source bucket (name or id)')
    .option('--source-collection <collection>', 'the source collection (name or id), instead of a bucket')
    .option('--prefix <prefix>', 'only objects whose key starts with this')
    .option('--extractor <name>', 'a feature extractor by name (repeatable; `tessera extractors list` shows them)', collect, [])
    .option('--parameters <json>', 'parameters of the --extractor(s), as JSON', jsonFlag('--parameters'))
    .option('--extractor-json <json>', 'a whole FeatureExtractorConfig as JSON (repeatable)', (v: string, prev: unknown[] = []) => [...prev, jsonFlag('--extractor-json')(v)], [])
    .option('--description <text>')
    .action(
      async (
        name: string,
        o: ClientOptions & { bucket?: string; sourceCollection?: string; prefix?: string; extractor: string[]; parameters?: Record<string, unknown>; extractorJson: unknown[]; description?: string },
      ) => {
        if (!o.bucket === !o.sourceCollection) throw new CliError('give exactly one source: --bucket <bucket> or --source-collection <collection>');
        const source = o.bucket
          ? { type: 'bucket' as const, bucket_id: o.bucket, ...(o.prefix ? { prefix_key: o.prefix } : {}) }
          : { type: 'collection' as const, collection_id: o.sourceCollection! };
        const created = await call(
          o,
          clientOf(o).POST('/v1/collections/create', {
            params: { header: { 'X-Namespace': namespaceOf(o) } },
            body: {
              collection_name: name,
              source,
              feature_extractors: extractorConfigs(o.extractor, o.extractorJson, o.parameters),
              ...(o.description ? { description: o.description } : {}),
            },
          }),
        );
        emit(o, created, (c) =>
          printFields(c, ['collection_name', 'collection_id', 'source', ['extractors', c.feature_extractors.map((f) => f.feature_extractor_name).join(', ')], 'created_at']),
        );
      },
    );
  clientCommand(collections, 'delete', 'Delete a collection and its documents')
    .argument('<collection>', 'name or col_ id')
    .option('--force', 'even while other collections read from it')
    .action(async (collection: string, o: ClientOptions & { force?: boolean }) => {
      const deleted = await call(
        o,
        clientOf(o).DELETE('/v1/collections/{collection_identifier}', {
          params: { header: { 'X-Namespace': namespaceOf(o) }, path: { collection_identifier: collection }, query: { force: Boolean(o.force) } },
        }),
      );
      emit(o, deleted, (d) => process.stdout.write(`deleted collection ${d.collection_name} (${d.collection_id})\n`));
    });
}
