/**
 * Documents written directly ("bring your own vectors"): fields, metadata and one vector per feature of
 * the collection, stored exactly as processing stores its documents (same rows, same vector indexes,
 * same payload), so every read and search treats both alike.
 *
 * Idempotence: a document written with a `key` has the source key `direct/key/<key>`; writing the key
 * again updates that row (ON CONFLICT on (collection, source key)), never adds one. Without a key the
 * source key is `direct/id/<document id>`. Processing's source keys start with a record id (`obj_…`,
 * `doc_…`), so `replace` handling in batches (deleteStale, by record prefix) never reaches these.
 *
 * All or none: every document is checked (shape, features, dims, who may replace what) before anything
 * is written; documents go in one statement, each feature's vectors in one index write, and if the
 * vectors cannot be written the documents this request created are removed again.
 */
import type { Knex } from 'knex';
import { NotAllowedError, NotFoundError, RequestValidationError, type FieldProblem } from '../../../kernel/errors.js';
import { newId } from '../../../kernel/ids.js';
import type { PluginRegistry } from '../../../kernel/plugins.js';
import type { VectorIndex, VectorRecord } from '../../../kernel/vectors/vector-index.js';
import type { DocumentRow, DocumentStore } from './document-store.js';
import { collectionFeatures, type CollectionFeature } from './features.js';
import { vectorPayload } from './vector-payload.js';
import type { CollectionRow } from './store.js';

const KEY_PREFIX = 'direct/key/';
const ID_PREFIX = 'direct/id/';
/** Beyond this many, further problems of one request are summarised (the first ones locate the fault). */
const MAX_PROBLEMS = 200;
/** Vectors are stored as 32-bit floats by every engine: larger values would be refused or become infinite. */
const FLOAT32_MAX = 3.4028234663852886e38;

/** The `key` a directly written document was written with (null for processing's documents). */
export function directKeyOf(sourceKey: string): string | null {
  return sourceKey.startsWith(KEY_PREFIX) ? sourceKey.slice(KEY_PREFIX.length) : null;
}

function isDirect(sourceKey: string): boolean {
  return sourceKey.startsWith(KEY_PREFIX) || sourceKey.startsWith(ID_PREFIX);
}

export interface DirectDocumentInput {
  key?: string;
  document_id?: string;
  fields?: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  vectors?: Record<string, number[]>;
  /** Absent: a user-scoped key's own principal for new documents, unchanged for replaced ones. */
  owner_principal?: string | null;
  grants?: string[];
}

export interface DirectWriteResult {
  row: DocumentRow;
  key: string | null;
  created: boolean;
}

interface Existing {
  document_id: string;
  source_key: string;
  owner_principal: string | null;
  grants: string[];
}

export interface DirectDocumentWriterDeps {
  db: Knex;
  documents: DocumentStore;
  vectors: VectorIndex;
  plugins: PluginRegistry;
}

export class DirectDocumentWriter {
  private readonly ensured = new Set<string>();

  constructor(private readonly deps: DirectDocumentWriterDeps) {}

  /**
   * Writes the documents in order. `principalId` is the caller's (user-scoped keys); `at(i)` locates
   * document i in the request body for problems (e.g. ['body', 'documents', i]).
   */
  async write(
    collection: CollectionRow,
    inputs: readonly DirectDocumentInput[],
    principalId: string | null,
    at: (index: number) => Array<string | number>,
  ): Promise<DirectWriteResult[]> {
    const features = collectionFeatures(collection, this.deps.plugins);
    this.checkOwners(inputs, principalId);
    const problems = new Problems();
    inputs.forEach((input, i) => checkInput(input, at(i), features, problems));
    // Looked up even when there are problems already, so one answer lists every problem of the request.
    const existing = await this.existing(collection, inputs);
    inputs.forEach((input, i) => checkReplacement(input, at(i), existing, principalId, problems));
    checkDuplicates(inputs, existing, at, problems);
    problems.throwIfAny();

    const rows = await this.upsertRows(collection, inputs, existing, principalId, at);
    const created = rows.filter((r) => r.inserted).map((r) => r.row.document_id);
    try {
      await this.writeVectors(features, inputs, rows);
    } catch (err) {
      // Nothing half-made stays behind: documents this request created go again (replacements stay replaced;
      // re-sending the request completes them).
      await this.deps.documents.delete(collection.collection_id, created);
      for (const feature of features) await this.deps.vectors.delete(feature.index, created).catch(() => 0);
      throw err;
    }
    return rows.map(({ row, inserted }) => ({ row, key: directKeyOf(row.source_key), created: inserted }));
  }

  /** A user-scoped key writes for its own principal only (403, like objects). */
  private checkOwners(inputs: readonly DirectDocumentInput[], principalId: string | null): void {
    if (!principalId) return;
    const other = inputs.find((input) => input.owner_principal !== undefined && input.owner_principal !== principalId);
    if (other) {
      throw new NotAllowedError(`A user-scoped key writes documents for its own principal only, not for '${String(other.owner_principal)}'`, {
        owner_principal: other.owner_principal ?? null,
      });
    }
  }

  /** The documents the inputs name (by key or id) that exist already, by source key and by id. */
  private async existing(collection: CollectionRow, inputs: readonly DirectDocumentInput[]): Promise<Map<string, Existing>> {
    const keys = inputs.flatMap((input) => (input.key !== undefined ? [KEY_PREFIX + input.key] : []));
    const ids = inputs.flatMap((input) => (input.document_id !== undefined ? [input.document_id] : []));
    const found = new Map<string, Existing>();
    if (keys.length === 0 && ids.length === 0) return found;
    const rows = (await this.deps.db('documents')
      .where({ collection_id: collection.collection_id })
      .where((q) => q.whereRaw('source_key = any(?::text[])', [keys]).orWhereRaw('document_id = any(?::text[])', [ids]))
      .select('document_id', 'source_key', 'owner_principal', 'grants')) as Existing[];
    for (const row of rows) {
      found.set(`key:${row.source_key}`, row);
      found.set(`id:${row.document_id}`, row);
    }
    return found;
  }

  private async upsertRows(
    collection: CollectionRow,
    inputs: readonly DirectDocumentInput[],
    existing: Map<string, Existing>,
    principalId: string | null,
    at: (index: number) => Array<string | number>,
  ): Promise<Array<{ row: DocumentRow; inserted: boolean }>> {
    const columns = { id: [] as string[], key: [] as string[], fields: [] as string[], metadata: [] as string[], owner: [] as Array<string | null>, grants: [] as string[] };
    for (const input of inputs) {
      const before = existingFor(input, existing);
      const documentId = before?.document_id ?? newId('doc');
      columns.id.push(documentId);
      columns.key.push(before?.source_key ?? (input.key !== undefined ? KEY_PREFIX + input.key : ID_PREFIX + documentId));
      columns.fields.push(JSON.stringify(input.fields ?? {}));
      columns.metadata.push(JSON.stringify(input.metadata ?? {}));
      const owner = principalId ? (before ? before.owner_principal : principalId) : input.owner_principal !== undefined ? input.owner_principal : (before?.owner_principal ?? null);
      columns.owner.push(owner);
      columns.grants.push(JSON.stringify(input.grants ?? before?.grants ?? []));
    }
    const now = new Date();
    const tier = Math.max(0, collection.source_lineage.length - 1);
    return this.deps.db.transaction(async (trx) => {
      // A user-scoped key replaces only what its principal owns or was granted, even if another request
      // created the key between the check above and this statement (then RETURNING misses the row).
      const result = (await trx.raw(
        `insert into documents (document_id, organization_id, namespace_id, collection_id, source_key, root_object_id,
           source_collection_id, source_document_id, processing_tier, fields, metadata, owner_principal, grants, created_at, updated_at)
         select d, ?, ?, ?, k, null, null, null, ?, f::jsonb, m::jsonb, p, g::jsonb, ?, ?
         from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[]) as u(d, k, f, m, p, g)
         on conflict (collection_id, source_key) do update set fields = excluded.fields, metadata = excluded.metadata,
           owner_principal = excluded.owner_principal, grants = excluded.grants, updated_at = excluded.updated_at
         where ?::text is null or documents.owner_principal = ? or documents.grants @> jsonb_build_array(?::text)
         returning *, (xmax = 0) as inserted`,
        [
          collection.organization_id, collection.namespace_id, collection.collection_id, tier, now, now,
          columns.id, columns.key, columns.fields, columns.metadata, columns.owner, columns.grants,
          principalId, principalId, principalId,
        ] as unknown as Knex.RawBinding[],
      )) as { rows: Array<DocumentRow & { inserted: boolean }> };
      const bySourceKey = new Map(result.rows.map(({ inserted, ...row }) => [row.source_key, { row: row as DocumentRow, inserted }]));
      const missing = columns.key.findIndex((key) => !bySourceKey.has(key));
      if (missing >= 0) {
        throw new RequestValidationError([
          { loc: [...at(missing), 'key'], msg: 'this key now names a document this key cannot change (written meanwhile by another principal)', type: 'not_yours' },
        ]);
      }
      const inserted = result.rows.filter((r) => r.inserted).length;
      if (inserted > 0) await trx('collections').where({ collection_id: collection.collection_id }).increment('document_count', inserted);
      return columns.key.map((key) => bySourceKey.get(key)!);
    });
  }

  /** One index write per feature; a replaced document loses the vectors of features it no longer has. */
  private async writeVectors(
    features: readonly CollectionFeature[],
    inputs: readonly DirectDocumentInput[],
    rows: ReadonlyArray<{ row: DocumentRow; inserted: boolean }>,
  ): Promise<void> {
    for (const feature of features) {
      const records: VectorRecord[] = [];
      const dropped: string[] = [];
      inputs.forEach((input, i) => {
        const { row, inserted } = rows[i]!;
        const vector = input.vectors?.[feature.name];
        if (vector) records.push({ id: row.document_id, vector, payload: vectorPayload(row) });
        else if (!inserted) dropped.push(row.document_id);
      });
      if (records.length > 0) await this.upsertVectors(feature, records);
      if (dropped.length > 0) {
        await this.deps.vectors.delete(feature.index, dropped).catch((err: unknown) => {
          if (!(err instanceof NotFoundError)) throw err;
        });
      }
    }
  }

  private async upsertVectors(feature: CollectionFeature, records: VectorRecord[]): Promise<void> {
    const spec = { name: feature.index, dims: feature.dims, distance: feature.distance };
    if (!this.ensured.has(feature.index)) {
      await this.deps.vectors.ensureIndex(spec);
      this.ensured.add(feature.index);
    }
    try {
      await this.deps.vectors.upsert(feature.index, records);
    } catch (err) {
      // Another process may have dropped the index since this one made sure of it: make it again, once.
      if (!(err instanceof NotFoundError)) throw err;
      await this.deps.vectors.ensureIndex(spec);
      await this.deps.vectors.upsert(feature.index, records);
    }
  }
}

function existingFor(input: DirectDocumentInput, existing: Map<string, Existing>): Existing | undefined {
  if (input.document_id !== undefined) return existing.get(`id:${input.document_id}`);
  if (input.key !== undefined) return existing.get(`key:${KEY_PREFIX}${input.key}`);
  return undefined;
}

class Problems {
  private readonly list: FieldProblem[] = [];
  private more = 0;

  add(loc: Array<string | number>, msg: string, type: string): void {
    if (this.list.length < MAX_PROBLEMS) this.list.push({ loc, msg, type });
    else this.more += 1;
  }

  throwIfAny(): void {
    if (this.list.length === 0) return;
    if (this.more > 0) this.list.push({ loc: ['body'], msg: `and ${this.more} more problem(s) not listed`, type: 'more_problems' });
    throw new RequestValidationError([...this.list]);
  }
}

function checkInput(input: DirectDocumentInput, at: Array<string | number>, features: readonly CollectionFeature[], problems: Problems): void {
  if (input.key !== undefined && input.document_id !== undefined) {
    problems.add([...at, 'document_id'], 'give key or document_id, not both', 'key_and_document_id');
  }
  const byName = new Map(features.map((f) => [f.name, f]));
  for (const name of Object.keys(input.fields ?? {})) {
    if (byName.has(name)) problems.add([...at, 'fields', name], `'${name}' is a feature: send its vector under vectors.${name}`, 'feature_in_fields');
  }
  for (const [name, vector] of Object.entries(input.vectors ?? {})) {
    const loc = [...at, 'vectors', name];
    const feature = byName.get(name);
    if (!feature) {
      const known = features.map((f) => `${f.name} (${f.dims}-d ${f.distance})`).join(', ');
      problems.add(loc, known ? `not a feature of this collection; its features: ${known}` : "this collection's extractors declare no features", 'unknown_feature');
      continue;
    }
    if (vector.length !== feature.dims) {
      problems.add(
        loc,
        `has ${vector.length} dimensions; vector index '${feature.index}' (feature ${feature.name}, ${feature.distance}) expects ${feature.dims}`,
        'dims_mismatch',
      );
      continue;
    }
    if (!vector.every((v) => Math.abs(v) <= FLOAT32_MAX)) {
      problems.add(loc, `vector values must fit a 32-bit float (magnitude at most ${FLOAT32_MAX})`, 'not_float32');
      continue;
    }
    if (feature.distance === 'cosine' && vector.every((v) => v === 0)) {
      problems.add(loc, 'a zero vector has no direction: cosine similarity is undefined for it', 'zero_vector');
    }
  }
}

/** One document per request at most once, whether named twice by key, by id, or once by each. */
function checkDuplicates(
  inputs: readonly DirectDocumentInput[],
  existing: Map<string, Existing>,
  at: (index: number) => Array<string | number>,
  problems: Problems,
): void {
  const seen = new Map<string, number>();
  inputs.forEach((input, i) => {
    const field = input.key !== undefined ? 'key' : input.document_id !== undefined ? 'document_id' : undefined;
    if (!field) return;
    const identity = existingFor(input, existing)?.document_id ?? `${field}:${input.key ?? input.document_id}`;
    const first = seen.get(identity);
    if (first !== undefined) problems.add([...at(i), field], `names the same document as document ${first} of this request`, 'duplicate');
    else seen.set(identity, i);
  });
}

/** Who may replace what: a named document must exist and be direct; user-scoped keys change only what they may see. */
function checkReplacement(
  input: DirectDocumentInput,
  at: Array<string | number>,
  existing: Map<string, Existing>,
  principalId: string | null,
  problems: Problems,
): void {
  const before = existingFor(input, existing);
  const visible = before && (!principalId || before.owner_principal === principalId || before.grants.includes(principalId));
  if (input.document_id !== undefined) {
    if (!before || !visible) {
      problems.add([...at, 'document_id'], 'no such document in this collection', 'unknown_document');
      return;
    }
    if (!isDirect(before.source_key)) {
      problems.add([...at, 'document_id'], 'this document was made by processing: its fields and vectors belong to it (PATCH changes its metadata)', 'not_direct');
      return;
    }
  }
  if (!before) return;
  if (!visible) {
    problems.add([...at, 'key'], 'this key names a document this key cannot change', 'not_yours');
    return;
  }
  if (principalId && before.owner_principal !== principalId && input.grants !== undefined) {
    problems.add([...at, 'grants'], "only the owner's keys change a document's grants", 'not_owner');
  }
}
