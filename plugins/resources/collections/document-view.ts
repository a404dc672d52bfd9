/** A document as every read returns it: the documents API and the payload stages see are one shape. */
import type { components } from '../../../generated/openapi.js';
import { iso } from '../../../kernel/http/values.js';
import type { DocumentRow } from './document-store.js';
import { directKeyOf } from './document-writes.js';

/**
 * The timestamps of rows held in the read cache (frozen, read by many searches) as text, converted once:
 * every hit of every search would otherwise format them again.
 */
const timestamps = new WeakMap<DocumentRow, { created: string; updated: string }>();

function timestampsOf(row: DocumentRow): { created: string; updated: string } {
  const known = timestamps.get(row);
  if (known) return known;
  const converted = { created: iso(row.created_at), updated: iso(row.updated_at) };
  if (Object.isFrozen(row)) timestamps.set(row, converted);
  return converted;
}

/** `viewer`: the caller's principal (user-scoped keys); grants are shown to the owner's keys and to keys that are not user-scoped. */
export function documentView(row: DocumentRow, viewer: string | null): components['schemas']['Document'] {
  const { created, updated } = timestampsOf(row);
  return {
    document_id: row.document_id,
    collection_id: row.collection_id,
    namespace_id: row.namespace_id,
    root_object_id: row.root_object_id,
    source_collection_id: row.source_collection_id,
    source_document_id: row.source_document_id,
    processing_tier: Number(row.processing_tier),
    fields: row.fields,
    metadata: row.metadata,
    owner_principal: row.owner_principal,
    ...(viewer === null || viewer === row.owner_principal ? { grants: row.grants } : {}),
    key: directKeyOf(row.source_key),
    created_at: created,
    updated_at: updated,
  };
}
