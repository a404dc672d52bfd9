/** Batch rows and their chunks, always within one organization. */
import type { Knex } from 'knex';
import type { components } from '../../../generated/openapi.js';
import { cursorFields, decodeCursor, encodeCursor } from '../../../kernel/http/cursor.js';
import { EncodedJson } from '../../../kernel/http/encoded-json.js';
import type { ProcessingOutcome } from '../../../kernel/processing.js';

type Schemas = components['schemas'];
export type BatchStatus = Schemas['UploadStatus'];
export type TierTaskInfo = Schemas['TierTaskInfo'];
export type BatchError = Schemas['BatchError'];

export interface BatchRow {
  batch_id: string;
  organization_id: string;
  namespace_id: string;
  bucket_id: string;
  status: BatchStatus;
  type: 'BUCKET' | 'COLLECTION';
  object_ids: string[];
  collection_ids: string[] | null;
  error: string | null;
  error_summary: Record<string, number> | null;
  manifest_key: string | null;
  task_id: string | null;
  loaded_object_ids: string[] | null;
  internal_metadata: Record<string, unknown>;
  metadata: Record<string, unknown>;
  tier_tasks: TierTaskInfo[];
  current_tier: number | null;
  total_tiers: number;
  dag_tiers: string[][] | null;
  generation: number;
  started_at: Date | null;
  completed_at: Date | null;
  progress_at: Date | null;
  created_by: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A batch row as `lock` reads it: everything but the object id lists. */
export type LockedBatch = Omit<BatchRow, 'object_ids' | 'loaded_object_ids'>;

const LOCKED_COLUMNS = [
  'batch_id', 'organization_id', 'namespace_id', 'bucket_id', 'status', 'type', 'collection_ids', 'error', 'error_summary', 'manifest_key',
  'task_id', 'internal_metadata', 'metadata', 'tier_tasks', 'current_tier', 'total_tiers', 'dag_tiers', 'generation', 'started_at',
  'completed_at', 'progress_at', 'created_by', 'created_at', 'updated_at',
] as const satisfies ReadonlyArray<keyof LockedBatch>;

/** SKIPPED: never ran (the batch was canceled first); CANCELED: stopped part-way by a cancel, its outcome says what it did. */
export type ChunkStatus = 'PENDING' | 'COMPLETED' | 'FAILED' | 'SKIPPED' | 'CANCELED';

export interface ChunkRow {
  batch_id: string;
  generation: number;
  tier: number;
  collection_id: string;
  chunk_index: number;
  record_ids: string[];
  status: ChunkStatus;
  task_id: string | null;
  outcome: ProcessingOutcome | null;
  started_at: Date | null;
  completed_at: Date | null;
}

export interface ChunkKey {
  batch_id: string;
  generation: number;
  tier: number;
  collection_id: string;
  chunk_index: number;
}

const JSON_COLUMNS = [
  'object_ids', 'collection_ids', 'error_summary', 'loaded_object_ids', 'internal_metadata', 'metadata', 'tier_tasks', 'dag_tiers',
] as const;

function toColumns(row: Partial<BatchRow>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...row };
  for (const column of JSON_COLUMNS) if (column in out && out[column] !== null) out[column] = JSON.stringify(out[column]);
  return out;
}

/** A chunk's columns besides its record ids and outcome: cheap to read on every look. */
const HEAD_COLUMNS = ['batch_id', 'generation', 'tier', 'collection_id', 'chunk_index', 'status', 'task_id', 'started_at', 'completed_at'] as const;
type ChunkHead = Omit<ChunkRow, 'record_ids' | 'outcome'>;

/** What never changes of a committed chunk: its record ids; and its outcome once it ended (only PENDING rows are ever updated). */
interface KnownChunk {
  record_ids: string[];
  outcome?: ProcessingOutcome | null;
}

/** Batches whose chunks this process remembers (least recently read go first). */
const KNOWN_BATCHES = 32;
/** Past this many chunks to fetch whole, one query by the caller's filter beats a list of keys. */
const FETCH_BY_KEYS = 64;

/** Object ids this process keeps of submitted batches, all batches together (about 40 bytes each). */
const KNOWN_IDS = 200_000;

type IdLists = Pick<BatchRow, 'object_ids' | 'loaded_object_ids'>;

function idCount(lists: IdLists): number {
  return lists.object_ids.length + (lists.loaded_object_ids?.length ?? 0);
}

/** A submitted batch's id lists as reply JSON, encoded once (see EncodedJson). */
export interface EncodedIdLists {
  object_ids: EncodedJson<string[]>;
  loaded_object_ids: EncodedJson<string[] | null>;
}

function chunkKeyOf(c: ChunkKey): string {
  return `${c.generation}\u0000${c.tier}\u0000${c.collection_id}\u0000${c.chunk_index}`;
}

export class BatchStore {
  /**
   * Record ids and outcomes of committed chunks, by batch. Every chunk completion aggregates its tier
   * from all the tier's chunks, and every status read computes progress from all the batch's chunks:
   * re-reading and re-parsing every outcome each time made both grow with the square of the chunks.
   * Chunk rows only change while PENDING, so what is remembered here never goes stale; rows read in a
   * transaction are remembered once it commits.
   */
  private readonly known = new Map<string, Map<string, KnownChunk>>();

  /** `knownObjectIds`: how many object ids (of all batches together) `idLists` holds at most. */
  constructor(
    private readonly db: Knex,
    private readonly options: { knownObjectIds: number } = { knownObjectIds: KNOWN_IDS },
  ) {}

  /**
   * Id lists of submitted batches, by batch. A batch's `object_ids` and `loaded_object_ids` never change once
   * it leaves DRAFT (objects are added only to a DRAFT batch, `loaded_object_ids` is set by its submit), so
   * these never go stale; batch ids are never reused. A status poll of a 10,000-object batch read, parsed,
   * passed between threads and collected some 600 KB of ids it had already read the time before.
   */
  private readonly idLists = new Map<string, IdLists & { encoded?: EncodedIdLists }>();
  private idListsSize = 0;

  async find(organizationId: string, batchId: string, db: Knex = this.db): Promise<BatchRow | undefined> {
    const where = { organization_id: organizationId, batch_id: batchId };
    const lists = this.knownIdLists(batchId);
    if (lists) {
      const head = (await db<BatchRow>('batches').where(where).first(...LOCKED_COLUMNS)) as LockedBatch | undefined;
      return head && { ...head, ...lists };
    }
    const row = await db<BatchRow>('batches').where(where).first();
    if (row) this.rememberIdLists(row, db);
    return row;
  }

  /** The rows completed with their id lists: remembered ones, the others read in one query. */
  private async withIdLists(heads: readonly LockedBatch[], db: Knex = this.db): Promise<BatchRow[]> {
    const lists = new Map<string, IdLists | undefined>(heads.map((h) => [h.batch_id, this.knownIdLists(h.batch_id)]));
    const missing = [...lists].filter(([, known]) => !known).map(([batchId]) => batchId);
    if (missing.length > 0) {
      const rows = (await db('batches').whereIn('batch_id', missing).select('batch_id', 'object_ids', 'loaded_object_ids')) as Array<IdLists & { batch_id: string }>;
      for (const { batch_id, ...read } of rows) lists.set(batch_id, read);
    }
    const out: BatchRow[] = [];
    for (const head of heads) {
      const found = lists.get(head.batch_id);
      if (!found) continue; // deleted between the two reads
      const row: BatchRow = { ...head, ...found };
      this.rememberIdLists(row, db);
      out.push(row);
    }
    return out;
  }

  /**
   * The row's id lists encoded as reply JSON, when they are the lists remembered for its batch (encoded on
   * first use, then kept with them: a poll of a 10,000-object batch no longer stringifies and encodes them).
   */
  encodedIdLists(row: BatchRow): EncodedIdLists | undefined {
    const lists = this.idLists.get(row.batch_id);
    if (!lists || lists.object_ids !== row.object_ids || lists.loaded_object_ids !== row.loaded_object_ids) return undefined;
    lists.encoded ??= { object_ids: EncodedJson.of(lists.object_ids), loaded_object_ids: EncodedJson.of(lists.loaded_object_ids) };
    return lists.encoded;
  }

  private knownIdLists(batchId: string): IdLists | undefined {
    const lists = this.idLists.get(batchId);
    if (lists) {
      // Most recently read last: the first entries are the ones forgotten when too many are held.
      this.idLists.delete(batchId);
      this.idLists.set(batchId, lists);
    }
    return lists;
  }

  /** Keeps a submitted batch's id lists, read outside any transaction (so committed). Frozen: rows share them. */
  private rememberIdLists(row: BatchRow, db: Knex): void {
    if (row.status === 'DRAFT' || db.isTransaction || this.idLists.has(row.batch_id)) return;
    const size = idCount(row);
    if (size > this.options.knownObjectIds) return;
    this.idLists.set(row.batch_id, {
      object_ids: Object.freeze(row.object_ids) as string[],
      loaded_object_ids: row.loaded_object_ids && (Object.freeze(row.loaded_object_ids) as string[]),
    });
    this.idListsSize += size;
    for (const [batchId, lists] of this.idLists) {
      if (this.idListsSize <= this.options.knownObjectIds) break;
      this.idLists.delete(batchId);
      this.idListsSize -= idCount(lists);
    }
  }

  /** What a running chunk checks to know whether its batch still runs it (without the row's id lists). */
  runState(organizationId: string, batchId: string): Promise<Pick<BatchRow, 'status' | 'generation'> | undefined> {
    return this.db<BatchRow>('batches').where({ organization_id: organizationId, batch_id: batchId }).first('status', 'generation');
  }

  /** The row, locked until the transaction ends: changes to one batch are applied one at a time. */
  lock(trx: Knex.Transaction, batchId: string): Promise<BatchRow | undefined> {
    return trx<BatchRow>('batches').where({ batch_id: batchId }).forUpdate().first();
  }

  /**
   * `lock` for the runner, without the object id lists: every chunk takes this lock twice, and in a batch of
   * 10,000 objects each read parsed 10,000 ids it never used.
   */
  lockProgress(trx: Knex.Transaction, batchId: string): Promise<LockedBatch | undefined> {
    return trx<BatchRow>('batches').where({ batch_id: batchId }).forUpdate().first(...LOCKED_COLUMNS);
  }

  async insert(row: BatchRow, db: Knex = this.db): Promise<void> {
    await db('batches').insert(toColumns(row));
  }

  async update(batchId: string, changes: Partial<BatchRow>, db: Knex = this.db): Promise<void> {
    await db('batches').where({ batch_id: batchId }).update(toColumns(changes));
  }

  async delete(batchId: string): Promise<void> {
    await this.db('batches').where({ batch_id: batchId }).delete();
  }

  /** The namespace's batches, with their manifests (a deleted namespace's purge). */
  inNamespace(organizationId: string, namespaceId: string): Promise<Array<Pick<BatchRow, 'batch_id' | 'manifest_key'>>> {
    return this.db('batches').where({ organization_id: organizationId, namespace_id: namespaceId }).select('batch_id', 'manifest_key');
  }

  async list(
    organizationId: string,
    bucketId: string,
    options: { limit: number; cursor?: string; status?: BatchStatus },
  ): Promise<{ rows: BatchRow[]; nextCursor: string | null }> {
    const q = this.db<BatchRow>('batches').where({ organization_id: organizationId, bucket_id: bucketId });
    if (options.status) q.where({ status: options.status });
    if (options.cursor) {
      const c = decodeCursor(options.cursor, { t: cursorFields.timestamp(), id: cursorFields.id('btch') });
      q.whereRaw('(created_at, batch_id) < (?::timestamptz, ?)', [c.t, c.id]);
    }
    const heads = (await q
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'batch_id', order: 'desc' }])
      .limit(options.limit + 1)
      .select(...LOCKED_COLUMNS)) as LockedBatch[];
    const page = await this.withIdLists(heads.slice(0, options.limit));
    const last = page.at(-1);
    return {
      rows: page,
      nextCursor: heads.length > options.limit && last ? encodeCursor({ t: new Date(last.created_at).toISOString(), id: last.batch_id }) : null,
    };
  }

  /**
   * Ids of the bucket's objects whose key starts with `prefix` ("" = all), in key order, at most `limit`:
   * one query, the prefix compared literally (no LIKE, so % and _ in it are plain characters). A user-scoped
   * caller (`principalId`) gets only the objects it owns.
   */
  async objectIdsWithPrefix(organizationId: string, bucketId: string, prefix: string, principalId: string | null, limit: number): Promise<string[]> {
    const q = this.db('objects').where({ organization_id: organizationId, bucket_id: bucketId });
    if (principalId) q.where({ owner_principal: principalId });
    if (prefix !== '') q.whereRaw('left(key, length(?)) = ?', [prefix, prefix]);
    const rows = (await q.orderBy('key').limit(limit).select('object_id')) as Array<{ object_id: string }>;
    return rows.map((r) => r.object_id);
  }

  /** Running batches (the health probe's subjects). */
  async running(): Promise<BatchRow[]> {
    return this.withIdLists((await this.db('batches').whereIn('status', ['PENDING', 'IN_PROGRESS']).select(...LOCKED_COLUMNS)) as LockedBatch[]);
  }

  // ------------------------------------------------------------------------------------------- chunks

  /** Plans chunks; planning the same tier twice (a redelivered tier task) keeps the first plan. */
  async insertChunks(rows: ChunkRow[], db: Knex): Promise<void> {
    if (rows.length === 0) return;
    await db('batch_chunks')
      .insert(rows.map((r) => ({ ...r, record_ids: JSON.stringify(r.record_ids), outcome: r.outcome ? JSON.stringify(r.outcome) : null })))
      .onConflict(['batch_id', 'generation', 'tier', 'collection_id', 'chunk_index'])
      .ignore();
  }

  chunk(key: ChunkKey, db: Knex = this.db): Promise<ChunkRow | undefined> {
    return db<ChunkRow>('batch_chunks').where(key).first();
  }

  chunksOf(batchId: string, generation: number, tier: number, db: Knex = this.db): Promise<ChunkRow[]> {
    return this.readChunks(batchId, { batch_id: batchId, generation, tier }, [{ column: 'collection_id' }, { column: 'chunk_index' }], db);
  }

  /** The chunks of one tier in every generation: a tier's results add up over the batch's runs. */
  chunksOfTier(batchId: string, tier: number, db: Knex = this.db): Promise<ChunkRow[]> {
    return this.readChunks(batchId, { batch_id: batchId, tier }, [{ column: 'generation' }, { column: 'collection_id' }, { column: 'chunk_index' }], db);
  }

  /** Every chunk of the batch (all generations), for progress and retries. */
  allChunks(batchId: string, db: Knex = this.db): Promise<ChunkRow[]> {
    return this.readChunks(batchId, { batch_id: batchId }, [{ column: 'generation' }, { column: 'tier' }, { column: 'chunk_index' }], db);
  }

  /**
   * The chunks matching `where`, in `order`: their heads (status, times) always from the database, record
   * ids and outcomes from what this process already read of them when it can (see `known`).
   */
  private async readChunks(
    batchId: string,
    where: Record<string, string | number>,
    order: Array<{ column: string }>,
    db: Knex,
  ): Promise<ChunkRow[]> {
    const heads = (await db('batch_chunks').where(where).orderBy(order).select(...HEAD_COLUMNS)) as ChunkHead[];
    let known = this.known.get(batchId);
    if (known) {
      // Most recently read last: the first entries are the ones forgotten when too many are held.
      this.known.delete(batchId);
      this.known.set(batchId, known);
    }
    const complete = (head: ChunkHead, entry: KnownChunk | undefined): entry is KnownChunk =>
      entry !== undefined && (head.status === 'PENDING' || entry.outcome !== undefined);
    const missing = heads.filter((h) => !complete(h, known?.get(chunkKeyOf(h))));
    if (missing.length > 0) {
      const query = db('batch_chunks').select('generation', 'tier', 'collection_id', 'chunk_index', 'status', 'record_ids', 'outcome');
      const fetched = (await (missing.length > FETCH_BY_KEYS
        ? query.where(where)
        : query.where({ batch_id: batchId }).whereIn(
            ['generation', 'tier', 'collection_id', 'chunk_index'],
            missing.map((m) => [m.generation, m.tier, m.collection_id, m.chunk_index]),
          ))) as Array<ChunkKey & Pick<ChunkRow, 'status' | 'record_ids' | 'outcome'>>;
      const learned = new Map<string, KnownChunk>();
      for (const row of fetched) {
        learned.set(chunkKeyOf(row), row.status === 'PENDING' ? { record_ids: row.record_ids } : { record_ids: row.record_ids, outcome: row.outcome });
      }
      const remember = () => {
        let entries = this.known.get(batchId);
        if (!entries) {
          this.known.set(batchId, (entries = new Map()));
          if (this.known.size > KNOWN_BATCHES) this.known.delete(this.known.keys().next().value!);
        }
        for (const [key, entry] of learned) entries.set(key, entry);
      };
      if (db.isTransaction) {
        // Only what a commit made lasting: a rolled back plan or finish must not be remembered.
        (db as Knex.Transaction).executionPromise.then(remember, () => undefined);
        known = new Map([...(known ?? []), ...learned]);
      } else {
        remember();
        known = this.known.get(batchId);
      }
    }
    return heads.map((head) => {
      const entry = known!.get(chunkKeyOf(head))!;
      return { ...head, record_ids: entry.record_ids, outcome: head.status === 'PENDING' ? null : (entry.outcome ?? null) };
    });
  }

  /**
   * Marks a chunk started while its batch run goes on (the batch row at `key.generation`, IN_PROGRESS), in
   * one statement holding the batch row's lock: a cancel either skips the chunk first, or sees it started
   * and lets it stop itself. False when the chunk is no longer pending or the run is over. A chunk taken
   * over from a dead worker keeps its first start.
   */
  async markStarted(key: ChunkKey, at: Date, db: Knex = this.db): Promise<boolean> {
    const res = (await db.raw(
      `with run as (select generation, status from batches where batch_id = ? for update)
       update batch_chunks set started_at = coalesce(started_at, ?)
       where batch_id = ? and generation = ? and tier = ? and collection_id = ? and chunk_index = ? and status = 'PENDING'
         and exists (select 1 from run where run.generation = ? and run.status = 'IN_PROGRESS')
       returning chunk_index`,
      [key.batch_id, at, key.batch_id, key.generation, key.tier, key.collection_id, key.chunk_index, key.generation],
    )) as { rows: unknown[] };
    return res.rows.length > 0;
  }

  /** Records a chunk's end once: false when it had already ended (a redelivered task finishing again). */
  async finish(key: ChunkKey, status: ChunkStatus, outcome: ProcessingOutcome | null, at: Date, db: Knex): Promise<boolean> {
    const updated = (await db('batch_chunks')
      .where(key)
      .where({ status: 'PENDING' })
      .update({ status, outcome: outcome ? JSON.stringify(outcome) : null, completed_at: at })
      .returning('chunk_index')) as unknown[];
    return updated.length > 0;
  }

  /** A cancel: chunks that have not started never will; running ones stop themselves and report what they did. */
  async skipUnstarted(batchId: string, at: Date, db: Knex = this.db): Promise<void> {
    await db('batch_chunks').where({ batch_id: batchId, status: 'PENDING' }).whereNull('started_at').update({ status: 'SKIPPED', completed_at: at });
  }
}
