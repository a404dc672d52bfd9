/**
 * What public callers see of a publication and of its results. Documents keep `document_id`, `score` and the
 * `exposed_fields` only (in `payload`, by exposed name); a stored blob among them keeps its download URL but not
 * its storage key (which names the organization and namespace). Anything else — collection, object and
 * namespace ids, vectors, stage statistics, budgets — never leaves.
 */
import type { components } from '../../../generated/openapi.js';
import { iso } from '../../../kernel/http/values.js';
import type { StageDocument } from '../../../kernel/plugins.js';
import type { ExecutionOutcome } from '../../../kernel/retrieval/engine.js';
import type { SavedRetrieverDefinition } from '../../../kernel/retrieval/executor.js';
import type { PublicationRow } from './store.js';

type Schemas = components['schemas'];

/** Top-level result fields that are the engine's, not the documents': never exposed even when named. */
const INTERNAL_FIELDS = new Set(['collection_id', 'namespace_id', 'organization_id', 'root_object_id', 'source_collection_id', 'source_document_id', 'vectors', 'owner_principal', 'grants']);
const MAX_DEPTH = 16;
/** Our own ids (`org_…`, `ns_…`, `col_…`, `ret_…`, `exec_…`): masked in the free text of templates. */
const INTERNAL_ID = /\b(?:org|ns|col|ret|pub|key|usr|bkt|obj|tmpl)_[A-Za-z0-9]{12,}\b/g;

function pathValue(source: unknown, path: readonly string[]): unknown {
  let value = source;
  for (const part of path) {
    if (value === null || typeof value !== 'object' || Array.isArray(value) || !Object.hasOwn(value, part)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** An exposed field's value: a field a stage added, else the document's `fields`, else its `metadata`, else a dotted path. */
function exposedValue(doc: StageDocument, name: string): unknown {
  if (!INTERNAL_FIELDS.has(name) && name !== 'payload' && name !== 'document_id' && name !== 'score' && Object.hasOwn(doc, name)) return doc[name];
  const payload = doc.payload ?? {};
  const path = name.split('.');
  for (const candidate of [['fields', ...path], ['metadata', ...path]]) {
    const value = pathValue(payload, candidate);
    if (value !== undefined) return value;
  }
  if (INTERNAL_FIELDS.has(path[0]!)) return undefined;
  return pathValue(payload, path);
}

/** Copies a value without storage keys (a blob reference keeps its URL, type, size and name). */
function withoutStorageKeys(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) return null;
  if (Array.isArray(value)) return value.map((v) => withoutStorageKeys(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'storage_key' || k === 'bucket_id' || k === 'object_id' || k === 'namespace_id' || k === 'organization_id' || k === 'collection_id') continue;
    out[k] = withoutStorageKeys(v, depth + 1);
  }
  return out;
}

export function exposeDocument(doc: StageDocument, exposedFields: readonly string[]): Schemas['PublicResultDocument'] {
  const payload: Record<string, unknown> = {};
  for (const name of exposedFields) {
    const value = exposedValue(doc, name);
    if (value !== undefined) payload[name] = withoutStorageKeys(value);
  }
  return { document_id: doc.document_id, ...(typeof doc.score === 'number' ? { score: doc.score } : {}), payload };
}

export function publicResult(outcome: ExecutionOutcome, exposedFields: readonly string[]): Schemas['PublicExecutionResult'] {
  return {
    execution_id: outcome.execution_id,
    status: outcome.status,
    documents: outcome.documents.map((d) => exposeDocument(d, exposedFields)),
    pagination: outcome.pagination,
    error: outcome.status === 'failed' ? publicFailure(outcome.execution_id) : null,
  };
}

/** A failed execution's cause names stages and collections: the public get a readable pointer instead. */
export function publicFailure(executionId: string): string {
  return `The search could not be completed (execution ${executionId}); try again, or tell the retriever's owner, who can see the cause in its execution history`;
}

export function publicSummary(row: PublicationRow): Schemas['PublicRetrieverSummary'] {
  return {
    public_name: row.public_name,
    title: row.title,
    description: row.description,
    password_protected: row.password_hash !== null,
    active: row.active,
    logo_url: row.display_config.logo_url ?? null,
    template_type: row.display_config.template_type ?? null,
    marketplace_listed: row.marketplace_listed,
    published_at: iso(row.created_at),
  };
}

export function publicConfig(row: PublicationRow, publicApiKey: string): Schemas['PublicRetrieverConfig'] {
  return {
    public_name: row.public_name,
    title: row.title,
    description: row.description,
    display_config: row.display_config,
    password_protected: row.password_hash !== null,
    public_api_key: row.password_hash === null ? publicApiKey : null,
  };
}

function maskIds(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.replace(INTERNAL_ID, '<your id>');
  if (value === null || typeof value !== 'object' || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) return value.map((v) => maskIds(v, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskIds(v, depth + 1)]));
}

export function publicTemplate(row: PublicationRow, retriever: SavedRetrieverDefinition): Schemas['PublicRetrieverTemplate'] {
  return {
    template_name: row.public_name,
    title: row.title,
    description: row.description,
    display_config: row.display_config,
    input_schema: maskIds(retriever.inputSchema) as Schemas['RetrieverInputSchema'],
    stages: retriever.stages.map((s) => ({
      stage_name: s.stage_name,
      stage_id: s.config.stage_id,
      ...(s.stage_type ? { stage_type: s.stage_type } : {}),
      parameters: maskIds(s.config.parameters ?? {}) as Record<string, unknown>,
    })),
    collection_count: retriever.collectionCount,
  };
}
