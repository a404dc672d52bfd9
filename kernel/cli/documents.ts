/** `documents list` and `documents get`: what processing wrote into a collection. */
import type { Command } from 'commander';
import { call, clientCommand, clientOf, namespaceOf, type ClientOptions } from './context.js';
import { cell, emit, printFields, printTable, shortTime } from './output.js';

/** The first text-like field of a document (what a person recognizes it by). */
export function summaryOf(fields: Record<string, unknown> | undefined): string {
  if (!fields) return '';
  for (const name of ['text', 'title', 'caption', 'content', 'name', 'description']) {
    const value = fields[name];
    if (typeof value === 'string' && value.trim()) return value;
  }
  // Otherwise the first string that is neither an id (doc_…) nor a timestamp.
  for (const value of Object.values(fields)) {
    if (typeof value === 'string' && value.trim() && !/^[a-z]+_[A-Za-z0-9]+$/.test(value) && !/^\d{4}-\d{2}-\d{2}T/.test(value)) return value;
  }
  return '';
}

export function registerDocuments(program: Command): void {
  const documents = program.command('documents').description('Documents of a collection');
  clientCommand(documents, 'list', 'List a collection’s documents, newest first')
    .argument('<collection>', 'name or col_ id')
    .option('--limit <n>', 'at most this many (default 100)', (v) => Number(v))
    .option('--cursor <cursor>', 'the next page (from the previous page)')
    .action(async (collection: string, o: ClientOptions & { limit?: number; cursor?: string }) => {
      const page = await call(
        o,
        clientOf(o).GET('/v1/collections/{collection_identifier}/documents', {
          params: {
            header: { 'X-Namespace': namespaceOf(o) },
            path: { collection_identifier: collection },
            query: { ...(o.limit ? { limit: o.limit } : {}), ...(o.cursor ? { cursor: o.cursor } : {}) },
          },
        }),
      );
      emit(o, page, (p) =>
        printTable(p.results, [
          { header: 'document id', value: (d) => d.document_id },
          { header: 'object', value: (d) => d.root_object_id },
          { header: 'tier', value: (d) => d.processing_tier, right: true },
          { header: 'summary', value: (d) => cell(summaryOf(d.fields), 50) },
          { header: 'created', value: (d) => shortTime(d.created_at) },
        ], p.has_next ? `more: --cursor ${p.next_cursor}` : `${p.results.length} document(s)`),
      );
    });
  clientCommand(documents, 'get', 'Show one document: its fields, metadata and where it came from')
    .argument('<collection>', 'name or col_ id')
    .argument('<document_id>')
    .action(async (collection: string, documentId: string, o: ClientOptions) => {
      const found = await call(
        o,
        clientOf(o).GET('/v1/collections/{collection_identifier}/documents/{document_id}', {
          params: { header: { 'X-Namespace': namespaceOf(o) }, path: { collection_identifier: collection, document_id: documentId } },
        }),
      );
      emit(o, found, (d) =>
        printFields({}, [
          ['document_id', d.document_id],
          ['collection_id', d.collection_id],
          ['root_object_id', d.root_object_id],
          ['source_document_id', d.source_document_id],
          ['tier', d.processing_tier],
          ...Object.entries(d.fields).map(([k, v]) => [`fields.${k}`, v] as [string, unknown]),
          ...Object.entries(d.metadata).map(([k, v]) => [`metadata.${k}`, v] as [string, unknown]),
          ['created_at', d.created_at],
        ]),
      );
    });
}
