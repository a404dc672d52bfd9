/**
 * Collection rules: the source must exist (a bucket, or a collection of the same namespace), every
 * feature extractor must be registered and its parameters must pass its schema (defaults filled in),
 * versions are recorded so a new extractor version never changes an existing collection silently, and
 * the output schema and source lineage are computed once, at creation. An `input_mapping` must name a
 * field the source's records can have: a property of the source bucket's schema (any field when the
 * bucket has none), or a field of the source collection's output schema (or `metadata.<name>`).
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { components } from '../../../generated/openapi.js';
import type { ResolvedNamespace } from '../../../kernel/auth/namespaces.js';
import type { ResourceIdentifiers } from '../../../kernel/auth/resource-identifiers.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError, InputError, NotFoundError, RequestValidationError, type FieldProblem } from '../../../kernel/errors.js';
import type { Announcer } from '../../../kernel/events/announcer.js';
import { parseFilter } from '../../../kernel/filters/filter.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import { newId } from '../../../kernel/ids.js';
import type { ExtractorPlugin, PluginRegistry } from '../../../kernel/plugins.js';
import type { ObjectCatalog } from '../../../kernel/processing.js';
import type { ReferenceRegistry } from '../../../kernel/references.js';
import type { CollectionRow, CollectionStore } from './store.js';

type Schemas = components['schemas'];
export type CollectionInput = Schemas['CollectionCreateRequest'];
export type CollectionPatch = Schemas['CollectionUpdateRequest'];

/** Fields every document carries, whatever extractor made it. */
const LINEAGE_FIELDS: Record<string, unknown> = {
  document_id: { type: 'string' },
  root_object_id: { type: 'string', description: 'The bucket object every document of this chain comes from.' },
  source_collection_id: { type: ['string', 'null'] },
  source_document_id: { type: ['string', 'null'] },
  processing_tier: { type: 'integer' },
};

export function featureUri(extractor: Pick<ExtractorPlugin, 'name' | 'version'>, output: string): string {
  return `tessera://${extractor.name}@${extractor.version}/${output}`;
}

export class CollectionService {
  private readonly ajv = new Ajv({ allErrors: true, strict: false, useDefaults: true });
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(
    private readonly store: CollectionStore,
    private readonly plugins: PluginRegistry,
    private readonly identifiers: ResourceIdentifiers,
    private readonly references: ReferenceRegistry,
    private readonly announcer: Announcer,
    private readonly clock: Clock,
    private readonly objects: () => ObjectCatalog,
  ) {}

  async get(organizationId: string, namespace: ResolvedNamespace, nameOrId: string): Promise<CollectionRow> {
    const row = await this.store.find(organizationId, namespace.id, nameOrId);
    if (!row) throw new NotFoundError(`Collection '${nameOrId}' not found in namespace '${namespace.name}'`, { collection: nameOrId });
    return row;
  }

  list(organizationId: string, namespace: ResolvedNamespace): Promise<CollectionRow[]> {
    return this.store.list(organizationId, namespace.id);
  }

  async create(organizationId: string, namespace: ResolvedNamespace | null, createdBy: string | null, input: CollectionInput): Promise<CollectionRow> {
    const namespaceId = namespace?.id ?? (await this.namespaceOfSource(organizationId, input.source));
    const { source, parent, bucketName } = await this.resolveSource(organizationId, namespaceId, input.source);
    const extractors = this.checkExtractors(input.feature_extractors ?? []);
    await this.checkInputMappings(organizationId, source, parent, bucketName, extractors.map(({ config }) => config));
    const now = this.clock.now();
    const collectionId = newId('col');
    const outputSchema = this.outputSchema(extractors, parent);
    const row: CollectionRow = {
      collection_id: collectionId,
      organization_id: organizationId,
      namespace_id: namespaceId,
      collection_name: input.collection_name,
      description: input.description ?? null,
      source,
      feature_extractors: extractors.map(({ config }) => config),
      taxonomy_applications: input.taxonomy_applications ?? [],
      enabled: input.enabled ?? true,
      metadata: input.metadata ?? {},
      document_handling: { output_type: input.document_handling?.output_type ?? 'single' },
      cache_config: {
        enabled: false,
        ttl_seconds: 604800,
        invalidation_strategy: 'replace_if_better',
        max_entries_per_key: 5,
        invalidation_events: [],
        ...input.cache_config,
      },
      source_lineage: [
        ...(parent?.source_lineage ?? []),
        {
          source_type: source.type,
          collection_id: source.type === 'collection' ? (source.collection_id ?? null) : null,
          bucket_id: source.type === 'bucket' ? (source.bucket_id ?? null) : null,
          bucket_config: source.type === 'bucket' ? { bucket_id: source.bucket_id, bucket_name: bucketName, prefix_key: source.prefix_key ?? null } : null,
          collection_config: parent ? { collection_id: parent.collection_id, collection_name: parent.collection_name } : null,
          feature_extractors: extractors.map(({ config }) => config),
          output_schema: outputSchema,
        },
      ],
      output_schema: outputSchema,
      status: 'DONE',
      document_count: 0,
      created_by: createdBy,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.store.insert(row);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConflictError(`A collection named '${row.collection_name}' already exists in this namespace`, { collection_name: row.collection_name });
      }
      throw err;
    }
    await this.announce('collection.created', row);
    return row;
  }

  async update(organizationId: string, namespace: ResolvedNamespace, nameOrId: string, patch: CollectionPatch): Promise<CollectionRow> {
    if (Object.keys(patch).length === 0) throw new InputError('Nothing to update: send at least one field');
    const before = await this.get(organizationId, namespace, nameOrId);
    const changes: Partial<CollectionRow> = { updated_at: this.clock.now() };
    if (patch.collection_name !== undefined) changes.collection_name = patch.collection_name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.enabled !== undefined) changes.enabled = patch.enabled;
    if (patch.metadata !== undefined) changes.metadata = patch.metadata;
    if (patch.taxonomy_applications !== undefined) changes.taxonomy_applications = patch.taxonomy_applications;
    if (patch.cache_config !== undefined) changes.cache_config = { ...before.cache_config, ...patch.cache_config };
    try {
      await this.store.update(before.collection_id, changes);
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new ConflictError(`A collection named '${patch.collection_name}' already exists in this namespace`);
      }
      throw err;
    }
    const after = { ...before, ...changes };
    await this.announce('collection.updated', after);
    return after;
  }

  async delete(organizationId: string, namespace: ResolvedNamespace, nameOrId: string, force: boolean): Promise<CollectionRow> {
    const row = await this.get(organizationId, namespace, nameOrId);
    const readers = await this.references.referencesTo('collection', organizationId, row.collection_id);
    const blocking = readers.filter((r) => r.blocking);
    if (blocking.length > 0) {
      const names = blocking.map((r) => `${r.resource_type} '${r.resource_name ?? r.resource_id}'`).join(', ');
      throw new ConflictError(
        `Collection '${row.collection_name}' is used by saved ${names}; delete ${blocking.length === 1 ? 'that retriever' : 'those retrievers'} ` +
          'first, or clone them onto other collections (POST /v1/retrievers/{retriever_id}/clone with collection_identifiers) and delete the originals',
        { references: blocking },
      );
    }
    if (readers.length > 0 && !force) {
      throw new ConflictError(
        `Collection '${row.collection_name}' is still read by ${readers.map((r) => `${r.resource_type} '${r.resource_name ?? r.resource_id}'`).join(', ')}; pass force=true to delete it anyway`,
        { references: readers },
      );
    }
    await this.store.delete(row.collection_id);
    await this.announce('collection.deleted', row);
    return row;
  }

  private async namespaceOfSource(organizationId: string, source: CollectionInput['source']): Promise<string> {
    const id = source.type === 'bucket' ? source.bucket_id : source.collection_id;
    const found = id === undefined ? undefined : await this.identifiers.locate(source.type, organizationId, id);
    if (!found && id !== undefined && id.startsWith(source.type === 'bucket' ? 'bkt_' : 'col_')) {
      const what = source.type === 'bucket' ? 'Source bucket' : 'Source collection';
      throw new NotFoundError(`${what} '${id}' not found`, { [source.type]: id });
    }
    if (!found) {
      throw new InputError(
        'Without X-Namespace, the source must be named by its id (bkt_… or col_…) so its namespace can be found; send X-Namespace to use a name',
        { source: id ?? null },
      );
    }
    return found;
  }

  private async resolveSource(
    organizationId: string,
    namespaceId: string,
    source: CollectionInput['source'],
  ): Promise<{ source: CollectionRow['source']; parent: CollectionRow | undefined; bucketName: string | null }> {
    const problems: FieldProblem[] = [];
    if (source.type === 'bucket' && !source.bucket_id) problems.push({ loc: ['body', 'source', 'bucket_id'], msg: 'required when type is bucket', type: 'missing' });
    if (source.type === 'collection' && !source.collection_id) {
      problems.push({ loc: ['body', 'source', 'collection_id'], msg: 'required when type is collection', type: 'missing' });
    }
    if (source.type === 'bucket' && source.collection_id) problems.push({ loc: ['body', 'source', 'collection_id'], msg: 'only for type collection', type: 'extra' });
    if (source.type === 'collection' && source.bucket_id) problems.push({ loc: ['body', 'source', 'bucket_id'], msg: 'only for type bucket', type: 'extra' });
    if (problems.length > 0) throw new RequestValidationError(problems);
    if (source.filters) parseFilter(source.filters, ['body', 'source', 'filters']);
    if (source.type === 'bucket') {
      const found = await this.identifiers.find('bucket', { organizationId, namespace: { id: namespaceId, name: '' }, identifier: source.bucket_id! });
      if (!found) throw new NotFoundError(`Source bucket '${source.bucket_id}' not found in this namespace`, { bucket: source.bucket_id });
      return { source: { ...source, bucket_id: found[0]! }, parent: undefined, bucketName: found[1] ?? null };
    }
    const parent = await this.store.find(organizationId, namespaceId, source.collection_id!);
    if (!parent) throw new NotFoundError(`Source collection '${source.collection_id}' not found in this namespace`, { collection: source.collection_id });
    return { source: { ...source, collection_id: parent.collection_id }, parent, bucketName: null };
  }

  private checkExtractors(configs: NonNullable<CollectionInput['feature_extractors']>) {
    const problems: FieldProblem[] = [];
    const checked = configs.map((config, i) => {
      const at = ['body', 'feature_extractors', i];
      const extractor = this.plugins.extractors.get(config.feature_extractor_name);
      if (!extractor) {
        problems.push({
          loc: [...at, 'feature_extractor_name'],
          msg: `unknown extractor; registered: ${[...this.plugins.extractors.keys()].join(', ') || 'none'}`,
          type: 'unknown_extractor',
        });
        return undefined;
      }
      if (config.version !== undefined && config.version !== extractor.version) {
        problems.push({ loc: [...at, 'version'], msg: `this deployment runs version ${extractor.version}`, type: 'extractor_version' });
      }
      const parameters = structuredClone(config.parameters ?? {});
      const validate = this.validatorOf(extractor);
      if (!validate(parameters)) {
        for (const e of validate.errors ?? []) {
          const path = e.instancePath.split('/').filter(Boolean);
          problems.push({ loc: [...at, 'parameters', ...path], msg: e.message ?? 'invalid', type: e.keyword });
        }
      }
      for (const feature of extractor.features) {
        if (!feature.modelParameter) continue;
        const model = parameters[feature.modelParameter];
        if (typeof model === 'string' && !this.plugins.models.has(model)) {
          problems.push({
            loc: [...at, 'parameters', feature.modelParameter],
            msg:
              `unknown model; served models: ${[...this.plugins.models.keys()].join(', ') || 'none'}` +
              // The ONNX plugin names each folder of TESSERA_MODEL_DIR onnx-<folder>.
              (model.startsWith('onnx-') ? `. An '${model}' model is served from a folder '${model.slice(5)}' in TESSERA_MODEL_DIR (model.onnx and its files): add it and restart the service` : ''),
            type: 'unknown_model',
          });
        }
      }
      const inputs = new Set(extractor.inputs.map((input) => input.name));
      for (const name of Object.keys(config.input_mapping ?? {})) {
        if (!inputs.has(name)) problems.push({ loc: [...at, 'input_mapping', name], msg: `not an input of ${extractor.name}`, type: 'unknown_input' });
      }
      const outputs = new Set([...Object.keys(schemaProperties(extractor.fields)), ...extractor.features.map((f) => f.name)]);
      for (const name of Object.keys(config.output_mapping ?? {})) {
        if (outputs.size > 0 && !outputs.has(name)) {
          problems.push({ loc: [...at, 'output_mapping', name], msg: `not an output of ${extractor.name}`, type: 'unknown_output' });
        }
      }
      return {
        extractor,
        config: {
          ...config,
          version: extractor.version,
          parameters,
          document_output_type: config.document_output_type ?? 'single',
          document_input_handling: config.document_input_handling ?? 'individual',
          document_output_handling: config.document_output_handling ?? 'create_new',
        },
      };
    });
    if (problems.length > 0) throw new RequestValidationError(problems);
    return checked.filter((c): c is NonNullable<typeof c> => c !== undefined);
  }

  /** Every `input_mapping` names a field the source's records can have (unless the source may have any field). */
  private async checkInputMappings(
    organizationId: string,
    source: CollectionRow['source'],
    parent: CollectionRow | undefined,
    bucketName: string | null,
    configs: ReadonlyArray<CollectionRow['feature_extractors'][number]>,
  ): Promise<void> {
    if (!configs.some((c) => Object.keys(c.input_mapping ?? {}).length > 0)) return;
    let known: string[] | null;
    let described: string;
    if (parent) {
      known = this.fieldsOfCollection(parent);
      described = `documents of source collection '${parent.collection_name}'`;
    } else {
      known = await this.objects().fieldsOf(organizationId, source.bucket_id!);
      described = `objects of source bucket '${bucketName ?? source.bucket_id}' (its schema)`;
    }
    if (!known) return;
    const fields = new Set(known);
    const problems: FieldProblem[] = [];
    configs.forEach((config, i) => {
      for (const [input, path] of Object.entries(config.input_mapping ?? {})) {
        const head = path.split('.')[0]!;
        if (fields.has(path) || fields.has(head) || (parent && head === 'metadata' && path.length > 'metadata.'.length)) continue;
        const hint = parent ? "; document metadata is read as 'metadata.<name>'" : '';
        problems.push({
          loc: ['body', 'feature_extractors', i, 'input_mapping', input],
          msg: `'${path}' is not a field ${described} can have; they have: ${known.slice(0, 50).join(', ')}${hint}`,
          type: 'unknown_source_field',
        });
      }
    });
    if (problems.length > 0) throw new RequestValidationError(problems);
  }

  /**
   * The fields a collection's documents can have: its output schema, unless an extractor of its chain
   * writes fields it does not declare (an open `fields` schema, e.g. passthrough_extractor) — then null.
   */
  private fieldsOfCollection(collection: CollectionRow): string[] | null {
    const chain = [...collection.source_lineage.flatMap((l) => l.feature_extractors), ...collection.feature_extractors];
    for (const config of chain) {
      const extractor = this.plugins.extractors.get(config.feature_extractor_name);
      const fields = extractor?.fields as { additionalProperties?: unknown } | undefined;
      if (!extractor || fields?.additionalProperties !== false) return null;
    }
    return Object.keys(collection.output_schema.properties ?? {});
  }

  private validatorOf(extractor: ExtractorPlugin): ValidateFunction {
    const key = `${extractor.name}@${extractor.version}`;
    let validate = this.validators.get(key);
    if (!validate) {
      validate = this.ajv.compile(extractor.parameters as object);
      this.validators.set(key, validate);
    }
    return validate;
  }

  /** Lineage fields, the parent's fields (documents keep them down the chain), and each extractor's outputs. */
  private outputSchema(extractors: ReturnType<CollectionService['checkExtractors']>, parent: CollectionRow | undefined) {
    const properties: Record<string, unknown> = { ...(parent?.output_schema.properties ?? {}), ...LINEAGE_FIELDS };
    for (const { extractor, config } of extractors) {
      const rename = (name: string) => config.output_mapping?.[name] ?? name;
      for (const [name, schema] of Object.entries(schemaProperties(extractor.fields))) properties[rename(name)] = schema;
      for (const feature of extractor.features) {
        const chosen = feature.modelParameter ? (config.parameters as Record<string, unknown>)[feature.modelParameter] : undefined;
        const model = typeof chosen === 'string' ? chosen : feature.model;
        const dims = model === feature.model ? feature.dims : (this.plugins.models.get(model)?.dims ?? feature.dims);
        properties[rename(feature.name)] = {
          type: 'array',
          items: { type: 'number' },
          'x-feature': { dims, distance: feature.distance, model, uri: featureUri(extractor, feature.name) },
        };
      }
    }
    return { properties };
  }

  private announce(type: string, row: CollectionRow): Promise<void> {
    return this.announcer.announce({
      type,
      organization_id: row.organization_id,
      data: { collection_id: row.collection_id, collection_name: row.collection_name, namespace_id: row.namespace_id },
    });
  }
}

function schemaProperties(schema: unknown): Record<string, unknown> {
  if (schema && typeof schema === 'object' && 'properties' in schema) {
    return ((schema as { properties?: Record<string, unknown> }).properties ?? {}) as Record<string, unknown>;
  }
  return {};
}
