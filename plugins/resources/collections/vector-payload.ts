/**
 * The payload stored beside each of a document's vectors, in every vector engine: what search filters read
 * inside the index (fields, metadata, lineage, owner and grants), and — when every field fits — the whole
 * document, so a search's hit can be answered from the index without reading the document again
 * (`documentFromPayload`; only where this process writes every document: kernel/db/local-read-cache.ts).
 *
 * A field too large for the payload (a string over 1 KiB, a list or an object) is left out and named in
 * `omitted_fields`: an index filter on such a field lets the document through, and the exact filter runs on
 * the document itself (plugins/stages/feature_search), so a filter never silently loses a document.
 */
import { iso } from '../../../kernel/http/values.js';
import { INDEX_PAYLOAD_OMITTED_FIELDS } from '../../../kernel/retrieval/documents.js';
import type { DocumentRow } from './document-store.js';

/** Longest string field kept in a payload (payloads of one index are held in memory by the in-process index). */
const MAX_PAYLOAD_STRING = 1024;

export function vectorPayload(row: DocumentRow): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  let omitted: string[] | undefined;
  for (const name of inJsonbOrder(Object.keys(row.fields))) {
    const value = row.fields[name];
    if (value === undefined) continue; // as JSON leaves it out
    if (value === null || typeof value === 'number' || typeof value === 'boolean' || (typeof value === 'string' && value.length <= MAX_PAYLOAD_STRING)) {
      fields[name] = value;
    } else {
      (omitted ??= []).push(name);
    }
  }
  return {
    organization_id: row.organization_id,
    namespace_id: row.namespace_id,
    collection_id: row.collection_id,
    document_id: row.document_id,
    source_key: row.source_key,
    root_object_id: row.root_object_id,
    source_collection_id: row.source_collection_id,
    source_document_id: row.source_document_id,
    processing_tier: row.processing_tier,
    owner_principal: row.owner_principal,
    grants: row.grants,
    metadata: jsonbOrdered(row.metadata),
    fields,
    ...(omitted ? { [INDEX_PAYLOAD_OMITTED_FIELDS]: omitted } : {}),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  };
}

const ASCII = /^[\x00-\x7f]*$/;

/** Orders a jsonb object's keys: shorter first, then by their UTF-8 bytes. */
function jsonbKeyOrder(a: string, b: string): number {
  if (ASCII.test(a) && ASCII.test(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  return Buffer.byteLength(a) - Buffer.byteLength(b) || Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/** The keys in jsonb's order: as given when they already are (rows read back from the database). */
function inJsonbOrder(keys: string[]): string[] {
  for (let i = 1; i < keys.length; i++) if (jsonbKeyOrder(keys[i - 1]!, keys[i]!) > 0) return keys.sort(jsonbKeyOrder);
  return keys;
}

/**
 * A JSON value with every object's keys in the order jsonb keeps them, so a document answered from its
 * payload lists its fields and metadata as one read from the database does, whoever wrote it.
 */
function jsonbOrdered(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(jsonbOrdered);
  if (typeof value !== 'object' || value === null) return value;
  const keys = Object.keys(value);
  if (keys.length === 0) return value;
  const out: Record<string, unknown> = {};
  for (const key of inJsonbOrder(keys)) {
    const v = (value as Record<string, unknown>)[key];
    if (v !== undefined) out[key] = jsonbOrdered(v);
  }
  return out;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isNullableString = (v: unknown): v is string | null => v === null || typeof v === 'string';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The document a payload holds, or undefined when it holds only part of it: fields left out, or a payload
 * written before payloads carried whole documents (no timestamps).
 */
export function documentFromPayload(payload: Record<string, unknown> | undefined): DocumentRow | undefined {
  if (!payload || payload[INDEX_PAYLOAD_OMITTED_FIELDS] !== undefined) return undefined;
  const p = payload;
  if (!isString(p.document_id) || !isString(p.organization_id) || !isString(p.namespace_id) || !isString(p.collection_id) || !isString(p.source_key)) return undefined;
  if (!isNullableString(p.root_object_id) || !isNullableString(p.source_collection_id) || !isNullableString(p.source_document_id) || !isNullableString(p.owner_principal)) return undefined;
  if (typeof p.processing_tier !== 'number' || !isObject(p.fields) || !isObject(p.metadata) || !Array.isArray(p.grants)) return undefined;
  if (!isString(p.created_at) || !isString(p.updated_at)) return undefined;
  return {
    document_id: p.document_id,
    organization_id: p.organization_id,
    namespace_id: p.namespace_id,
    collection_id: p.collection_id,
    source_key: p.source_key,
    root_object_id: p.root_object_id,
    source_collection_id: p.source_collection_id,
    source_document_id: p.source_document_id,
    processing_tier: p.processing_tier,
    fields: p.fields,
    metadata: p.metadata,
    owner_principal: p.owner_principal,
    grants: p.grants as string[],
    created_at: new Date(p.created_at),
    updated_at: new Date(p.updated_at),
  };
}
