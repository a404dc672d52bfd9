/**
 * What a document read adds when asked: download URLs for the stored blobs a document references
 * (`return_presigned_urls`: thumbnails, keyframes, source blobs) and the document's stored vectors
 * (`return_vectors`), so users can see what processing produced. Both go through the kernel's shared
 * retrieval helpers, so a document read and a retriever execute show the same shapes; a page is signed in
 * one pass and its vectors are read with one call per feature index.
 */
import type { components } from '../../../generated/openapi.js';
import type { BlobStore } from '../../../kernel/blobs/blob-store.js';
import type { DocumentSource } from '../../../kernel/retrieval/documents.js';
import { lineageReader } from '../../../kernel/retrieval/lineage.js';
import { DocumentUrlSigner } from '../../../kernel/retrieval/presign.js';
import { readVectors } from '../../../kernel/retrieval/vectors.js';
import type { DocumentRow } from './document-store.js';
import { documentView } from './document-view.js';
import type { CollectionRow } from './store.js';

type DocumentBody = components['schemas']['Document'];

export interface DocumentReadOptions {
  presignedUrls: boolean;
  vectors: boolean;
}

export interface DocumentReader {
  organizationId: string;
  /** Set for user-scoped keys (the rows were already read with its visibility rule). */
  principalId: string | null;
}

export class DocumentReads {
  constructor(
    private readonly blobs: () => BlobStore,
    private readonly source: () => DocumentSource,
  ) {}

  /** The rows (all of `collection`, all visible to the reader) as document reads return them, with what was asked for. */
  async views(reader: DocumentReader, collection: CollectionRow, rows: readonly DocumentRow[], options: DocumentReadOptions): Promise<DocumentBody[]> {
    let views = rows.map((row) => documentView(row, reader.principalId));
    if (views.length === 0) return views;
    if (options.presignedUrls) {
      const signer = new DocumentUrlSigner(this.blobs(), this.source(), { organizationId: reader.organizationId, namespaceId: collection.namespace_id });
      views = await signer.sign(views, {
        // A blob deleted since (its object was removed) gets no URL rather than one that answers 404.
        skipMissing: true,
        ...(reader.principalId !== null ? { lineageOf: await lineageReader(this.source(), reader.organizationId, reader.principalId, views) } : {}),
      });
    }
    if (options.vectors) {
      const vectors = await readVectors(this.source(), reader, [collection.collection_id], rows);
      views = views.map((view) => ({ ...view, vectors: vectors.get(view.document_id) ?? {} }));
    }
    return views;
  }
}
