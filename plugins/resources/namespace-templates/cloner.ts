/**
 * Instantiation: a new namespace holding a copy of what a source namespace holds, with new ids and every
 * reference between the copies rewritten (id-map.ts). All or nothing: the rows (namespace, buckets,
 * collections, documents with their text index, retrievers) commit in one transaction; the vectors and
 * files, which live outside it (LanceDB, the blob store), are written first under the copies' own names and
 * removed again if anything fails, so a failed instantiation leaves nothing behind.
 *
 * Not copied: bucket objects, uploads and batches (a copied bucket starts empty; copied documents keep
 * `root_object_id`, the source's object they were made from), and a retriever's publication, keys, history
 * and interactions.
 */
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { AuditActor, AuditLog } from '../../../kernel/auth/audit-log.js';
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { Clock } from '../../../kernel/clock.js';
import { ConflictError } from '../../../kernel/errors.js';
import { isUniqueViolation } from '../../../kernel/http/values.js';
import type { PluginRegistry } from '../../../kernel/plugins.js';
import { textFieldsOf, type TextIndex } from '../../../kernel/text/index.js';
import type { VectorIndex } from '../../../kernel/vectors/vector-index.js';
import { FileCopier } from './file-copy.js';
import { IdMap } from './id-map.js';
import { checkSize, type CloneLimits } from './limits.js';
import { insertRows, rewriteJson } from './rows.js';
import { VectorCopier } from './vector-copy.js';
import { readSource, sourceSize, type DocumentRow, type SourceContents } from './source.js';

export interface CloneRequest {
  organizationId: string;
  sourceNamespaceId: string;
  templateId: string;
  namespaceName: string;
  description: string | null;
  actor: AuditActor;
}

export interface CloneResult {
  namespaceId: string;
  namespaceName: string;
  createdAt: Date;
  copied: { buckets: number; collections: number; documents: number; vectors: number; retrievers: number; files: number };
}

export interface ClonerDeps {
  db: Knex;
  vectors: VectorIndex;
  blobs: BlobStore;
  text: TextIndex;
  plugins: PluginRegistry;
  audit: AuditLog;
  clock: Clock;
  log: Logger;
  limits: CloneLimits;
}

function nameTaken(name: string): ConflictError {
  return new ConflictError(`A namespace named '${name}' already exists in this organization`, { namespace_name: name });
}

export function sourceGone(templateName: string): ConflictError {
  return new ConflictError(`Template '${templateName}' is inactive: its source namespace was deleted`, { status: 'inactive' });
}

export class NamespaceCloner {
  constructor(private readonly deps: ClonerDeps) {}

  /** Whether the source fits the limits (counted, not read): checked when a template is made, too. */
  async checkSource(organizationId: string, namespaceId: string, namespaceName: string): Promise<void> {
    checkSize(await sourceSize(this.deps.db, organizationId, namespaceId), this.deps.limits, namespaceName);
  }

  async clone(request: CloneRequest, templateName: string): Promise<CloneResult> {
    const { db, limits } = this.deps;
    const { organizationId } = request;
    // The cheap refusals first: a taken name, a source too large (counted before anything is read whole).
    const taken = await db('namespaces').where({ organization_id: organizationId }).whereRaw('lower(namespace_name) = lower(?)', [request.namespaceName]).first('namespace_id');
    if (taken) throw nameTaken(request.namespaceName);
    await this.checkSource(organizationId, request.sourceNamespaceId, templateName);
    const timings: Record<string, number> = {};
    let phaseStarted = Date.now();
    const phase = (name: string) => {
      timings[name] = Date.now() - phaseStarted;
      phaseStarted = Date.now();
    };
    const source = await readSource(db, organizationId, request.sourceNamespaceId);
    phase('read_ms');
    if (!source.namespace) throw sourceGone(templateName);
    // Counted again on what was read: the source may have grown in between.
    checkSize({ buckets: source.buckets.length, collections: source.collections.length, documents: source.documents.length, retrievers: source.retrievers.length }, limits, source.namespace.namespace_name);

    const ids = this.issueIds(source);
    const vectors = new VectorCopier(this.deps.vectors, this.deps.plugins, ids);
    const files = new FileCopier(this.deps.blobs, ids, organizationId);
    try {
      await files.plan(source.documents);
      checkSize({ fileBytes: files.plannedBytes }, limits, source.namespace.namespace_name);
      await files.copy();
      phase('files_ms');
      const byCollection = groupBy(source.documents, (d) => d.collection_id);
      for (const collection of source.collections) await vectors.copyCollection(collection, byCollection.get(collection.collection_id) ?? []);
      phase('vectors_ms');
      const createdAt = this.deps.clock.now();
      await db.transaction((trx) => this.writeRows(trx, request, source, ids, files, createdAt));
      phase('rows_ms');
      this.deps.log.info({ namespace_name: request.namespaceName, template_id: request.templateId, documents: source.documents.length, vectors: vectors.copied, ...timings }, 'namespace instantiated');
      return {
        namespaceId: ids.of(request.sourceNamespaceId),
        namespaceName: request.namespaceName,
        createdAt,
        copied: {
          buckets: source.buckets.length,
          collections: source.collections.length,
          documents: source.documents.length,
          vectors: vectors.copied,
          retrievers: source.retrievers.length,
          files: files.count,
        },
      };
    } catch (err) {
      await vectors.undo().catch((undoErr: unknown) => this.deps.log.warn({ err: undoErr, indexes: vectors.created }, 'could not drop the vector indexes of a failed instantiation'));
      await files.undo();
      if (isUniqueViolation(err)) throw nameTaken(request.namespaceName);
      throw err;
    }
  }

  private issueIds(source: SourceContents): IdMap {
    const ids = new IdMap();
    ids.issue(source.namespace!.namespace_id, 'ns');
    for (const row of source.buckets) ids.issue(row.bucket_id, 'bkt');
    for (const row of source.collections) ids.issue(row.collection_id, 'col');
    for (const row of source.documents) ids.issue(row.document_id, 'doc');
    for (const row of source.retrievers) ids.issue(row.retriever_id, 'ret');
    return ids;
  }

  private async writeRows(trx: Knex.Transaction, request: CloneRequest, source: SourceContents, ids: IdMap, files: FileCopier, now: Date): Promise<void> {
    const namespaceId = ids.of(source.namespace!.namespace_id);
    const made = { created_by: request.actor.userEmail, created_at: now, updated_at: now };
    await insertRows(trx, 'namespaces', [{
      ...source.namespace!, namespace_id: namespaceId, namespace_name: request.namespaceName, description: request.description, ...made,
    }]);
    await insertRows(trx, 'buckets', source.buckets.map((row) => ({
      ...rewriteJson(row, (v) => ids.json(v), ['metadata', 'schema']),
      bucket_id: ids.of(row.bucket_id), namespace_id: namespaceId, ...made,
      // Objects are not copied: the copy starts empty.
      object_count: 0, total_size_bytes: 0,
    })));
    const counts = new Map<string, number>();
    for (const doc of source.documents) counts.set(doc.collection_id, (counts.get(doc.collection_id) ?? 0) + 1);
    await insertRows(trx, 'collections', source.collections.map((row) => ({
      ...rewriteJson(row, (v) => ids.json(v), ['metadata']),
      collection_id: ids.of(row.collection_id), namespace_id: namespaceId, document_count: counts.get(row.collection_id) ?? 0, ...made,
    })));
    // Documents keep their content and timestamps (the vectors' payloads mirror them); ids and lineage are the copies'.
    const documents = source.documents.map((row): DocumentRow => ({
      ...row,
      document_id: ids.of(row.document_id),
      namespace_id: namespaceId,
      collection_id: ids.of(row.collection_id),
      source_key: ids.text(row.source_key),
      source_collection_id: ids.textOrNull(row.source_collection_id),
      source_document_id: ids.textOrNull(row.source_document_id),
      fields: files.rewrite(row.fields),
    }));
    await insertRows(trx, 'documents', documents);
    // The copy's text index holds what the source's does (documents written directly have none there), made by
    // the TextIndex from the same fields, as the writers make it.
    const indexed = new Set(
      ((await trx('text_documents').whereIn('collection_id', source.collections.map((c) => c.collection_id)).select('document_id')) as Array<{ document_id: string }>)
        .map((row) => row.document_id),
    );
    const withText = documents.filter((_, i) => indexed.has(source.documents[i]!.document_id));
    for (const [collectionId, docs] of groupBy(withText, (d) => d.collection_id)) {
      await this.deps.text.index(collectionId, docs.map((d) => ({ document_id: d.document_id, fields: textFieldsOf(d.fields) })), trx);
    }
    await insertRows(trx, 'retrievers', source.retrievers.map((row) => ({
      ...rewriteJson(row, (v) => ids.json(v), []),
      retriever_id: ids.of(row.retriever_id), namespace_id: namespaceId, version: 1, ...made, updated_by: request.actor.userEmail,
    })));
    await this.deps.audit.record(trx, {
      organizationId: request.organizationId,
      action: 'namespace_created',
      actor: request.actor,
      resourceType: 'namespace',
      resourceId: namespaceId,
      resourceName: request.namespaceName,
      changes: { namespace_name: request.namespaceName, description: request.description, template_id: request.templateId, source_namespace_id: source.namespace!.namespace_id },
    });
  }
}

function groupBy<T>(rows: readonly T[], key: (row: T) => string): Map<string, T[]> {
  const groups = new Map<string, T[]>();
  for (const row of rows) {
    const group = groups.get(key(row));
    if (group) group.push(row);
    else groups.set(key(row), [row]);
  }
  return groups;
}
