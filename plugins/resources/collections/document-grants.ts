/**
 * Grants: principals besides the owner that may read a document. A grant follows the derivation chain —
 * documents derived from this one (collections reading this collection) gain and lose it with it — and
 * processing carries a source document's grants to what it derives (records.ts), keeping grants a derived
 * document already has (document-store upsert), so reprocessing never undoes a grant.
 */
import type { Knex } from 'knex';
import { NotAllowedError, NotFoundError } from '../../../kernel/errors.js';
import type { PluginRegistry } from '../../../kernel/plugins.js';
import type { VectorIndex } from '../../../kernel/vectors/vector-index.js';
import type { DocumentRow } from './document-store.js';
import { refreshVectorPayloads } from './features.js';
import type { CollectionRow, CollectionStore } from './store.js';

export interface GrantChange {
  document: DocumentRow;
  /** Documents derived from it whose grants changed with it. */
  derived: number;
  /** Every changed document (it and those derived from it) by collection. */
  changed: Array<{ collection: CollectionRow; documentIds: string[] }>;
}

export interface DocumentGrantsDeps {
  db: Knex;
  collections: CollectionStore;
  vectors: VectorIndex;
  plugins: PluginRegistry;
}

export class DocumentGrants {
  constructor(private readonly deps: DocumentGrantsDeps) {}

  grant(collection: CollectionRow, documentId: string, principalIds: readonly string[], callerPrincipal: string | null): Promise<GrantChange> {
    return this.change(collection, documentId, callerPrincipal, {
      // Union, each principal once (jsonb_agg(distinct) also sorts them).
      sql: "(select coalesce(jsonb_agg(distinct e.g), '[]'::jsonb) from jsonb_array_elements(documents.grants || ?::jsonb) as e(g))",
      binding: JSON.stringify(principalIds),
    });
  }

  revoke(collection: CollectionRow, documentId: string, principalId: string, callerPrincipal: string | null): Promise<GrantChange> {
    // jsonb `-` text removes every array element equal to that string.
    return this.change(collection, documentId, callerPrincipal, { sql: 'documents.grants - ?::text', binding: principalId });
  }

  private async change(
    collection: CollectionRow,
    documentId: string,
    callerPrincipal: string | null,
    grants: { sql: string; binding: string },
  ): Promise<GrantChange> {
    const target = (await this.deps.db<DocumentRow>('documents')
      .where({ organization_id: collection.organization_id, collection_id: collection.collection_id, document_id: documentId })
      .first()) as DocumentRow | undefined;
    const visible = target && (!callerPrincipal || target.owner_principal === callerPrincipal || target.grants.includes(callerPrincipal));
    if (!target || !visible) throw new NotFoundError(`Document '${documentId}' not found in collection '${collection.collection_name}'`, { document_id: documentId });
    if (callerPrincipal && target.owner_principal !== callerPrincipal) {
      throw new NotAllowedError("Only keys of the document's owner (or keys that are not user-scoped) change its grants", { document_id: documentId });
    }
    const result = (await this.deps.db.raw(
      `with recursive tree(document_id) as (
         select document_id from documents where document_id = ?
         union
         select d.document_id from documents d join tree t on d.source_document_id = t.document_id where d.organization_id = ?
       )
       update documents set grants = ${grants.sql}, updated_at = ?
       where document_id in (select document_id from tree)
       returning *`,
      [documentId, collection.organization_id, grants.binding, new Date()],
    )) as { rows: DocumentRow[] };
    const rows = result.rows;
    const collections = new Map<string, CollectionRow>([[collection.collection_id, collection]]);
    for (const id of new Set(rows.map((r) => r.collection_id))) {
      if (collections.has(id)) continue;
      const found = await this.deps.collections.findById(collection.organization_id, id);
      if (found) collections.set(id, found);
    }
    await refreshVectorPayloads(this.deps.vectors, this.deps.plugins, collections, rows);
    const changed = [...collections.values()].map((c) => ({ collection: c, documentIds: rows.filter((r) => r.collection_id === c.collection_id).map((r) => r.document_id) }));
    return { document: rows.find((r) => r.document_id === documentId)!, derived: rows.length - 1, changed };
  }
}
