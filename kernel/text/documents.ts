/**
 * What the text index needs to know about documents: which of their fields are text, and how a filter
 * names document columns. The `documents` table is the source of truth for who may read a document.
 */
import { columnFieldResolver, type FieldResolver } from '../filters/sql.js';

const COLUMNS = ['document_id', 'root_object_id', 'source_collection_id', 'source_document_id', 'processing_tier', 'owner_principal'];
const byColumn = columnFieldResolver({ columns: COLUMNS, timestamps: ['created_at', 'updated_at'], jsonRoots: ['fields', 'metadata'] });

/** `fields.x` and `metadata.x` address those objects, a column its value, and a bare name a field (`category` = `fields.category`). */
export const documentFieldResolver: FieldResolver = (field) => {
  const [root, ...rest] = field.split('.');
  if ((root === 'fields' || root === 'metadata') && rest.length > 0) return byColumn(field);
  if (COLUMNS.includes(field) || field === 'created_at' || field === 'updated_at') return byColumn(field);
  return byColumn(`fields.${field}`);
};

/** A text longer than this is indexed by its start only (the analyzer also caps terms per field). */
const MAX_INDEXED_CHARS = 1_000_000;

/**
 * The text fields of a document: every top-level field whose value is a non-empty string (`text`,
 * `ocr_text`, `transcript`, `title`, ...). Nested objects (blob references) and arrays are not text.
 */
export function textFieldsOf(fields: Record<string, unknown>): Record<string, string> {
  const text: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    // Control characters in a field name would collide with how postings are loaded (memory.ts).
    if (/[\u0000-\u001f]/u.test(name)) continue;
    if (typeof value === 'string' && value.trim().length > 0) text[name] = value.length > MAX_INDEXED_CHARS ? value.slice(0, MAX_INDEXED_CHARS) : value;
  }
  return text;
}
