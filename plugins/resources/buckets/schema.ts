/**
 * A bucket's schema: which metadata fields and blob properties its objects have, and of what type.
 * An empty schema makes a schemaless bucket (any metadata, blob types inferred from content).
 */
import { isDateOrTimestamp } from '../../../kernel/dates.js';
import type { FieldProblem } from '../../../kernel/errors.js';

export type PropertyType =
  | 'string' | 'number' | 'integer' | 'boolean' | 'date' | 'json' | 'text' | 'image' | 'video' | 'audio' | 'pdf' | 'url';

export interface SchemaProperty {
  type: PropertyType;
  required?: boolean;
  description?: string;
}

export interface BucketSchema {
  properties: Record<string, SchemaProperty>;
}

export const BLOB_TYPES: ReadonlySet<PropertyType> = new Set(['text', 'image', 'video', 'audio', 'pdf', 'json']);
const METADATA_TYPES: ReadonlySet<PropertyType> = new Set(['string', 'number', 'integer', 'boolean', 'date', 'url', 'json']);

export function isSchemaless(schema: BucketSchema): boolean {
  return Object.keys(schema.properties).length === 0;
}

function typeProblem(type: PropertyType, value: unknown): string | undefined {
  switch (type) {
    case 'string':
    case 'text':
      return typeof value === 'string' ? undefined : 'must be a string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? undefined : 'must be a number';
    case 'integer':
      return Number.isInteger(value) ? undefined : 'must be an integer';
    case 'boolean':
      return typeof value === 'boolean' ? undefined : 'must be true or false';
    case 'date':
      return typeof value === 'string' && isDateOrTimestamp(value)
        ? undefined
        : 'must be a date (2026-01-31) or an RFC 3339 date-time (2026-01-31T12:00:00Z)';
    case 'url':
      return typeof value === 'string' && /^https?:\/\/\S+$/i.test(value) ? undefined : 'must be an http(s) URL';
    case 'json':
      return undefined;
    default:
      return `is a ${type} property: give it in blobs, not in metadata`;
  }
}

/** Problems with an object's metadata and blob properties against the schema (empty when it fits). */
export function checkObject(
  schema: BucketSchema,
  metadata: Record<string, unknown>,
  blobProperties: readonly string[],
  loc: { metadata: Array<string | number>; blobs: Array<string | number> },
): FieldProblem[] {
  const problems: FieldProblem[] = [];
  if (isSchemaless(schema)) return problems;
  for (const [field, value] of Object.entries(metadata)) {
    const property = schema.properties[field];
    if (!property) {
      problems.push({ loc: [...loc.metadata, field], msg: `'${field}' is not a property of the bucket schema`, type: 'schema_unknown_property' });
      continue;
    }
    if (!METADATA_TYPES.has(property.type)) {
      problems.push({ loc: [...loc.metadata, field], msg: `is a ${property.type} property: give it in blobs, not in metadata`, type: 'schema_type' });
      continue;
    }
    const problem = typeProblem(property.type, value);
    if (problem) problems.push({ loc: [...loc.metadata, field], msg: problem, type: 'schema_type' });
  }
  blobProperties.forEach((name, i) => {
    const property = schema.properties[name];
    if (!property) {
      problems.push({ loc: [...loc.blobs, i, 'property'], msg: `'${name}' is not a property of the bucket schema`, type: 'schema_unknown_property' });
    } else if (!BLOB_TYPES.has(property.type)) {
      problems.push({ loc: [...loc.blobs, i, 'property'], msg: `'${name}' is a ${property.type} property: give it in metadata`, type: 'schema_type' });
    }
  });
  const given = new Set([...Object.keys(metadata), ...blobProperties]);
  for (const [field, property] of Object.entries(schema.properties)) {
    if (property.required && !given.has(field)) {
      problems.push({ loc: [...loc.metadata, field], msg: `'${field}' is required by the bucket schema`, type: 'schema_required' });
    }
  }
  return problems;
}

/** The blob type a sniffed content type fits, for schemaless buckets and compatibility checks. */
export function blobTypeOf(contentType: string): PropertyType {
  if (contentType.startsWith('image/')) return 'image';
  if (contentType.startsWith('video/')) return 'video';
  if (contentType.startsWith('audio/')) return 'audio';
  if (contentType === 'application/pdf') return 'pdf';
  if (contentType === 'application/json') return 'json';
  if (contentType.startsWith('text/')) return 'text';
  return 'text';
}

/** Whether stored content of this (sniffed) type may fill a property of that type. */
export function contentFits(type: PropertyType, contentType: string): boolean {
  switch (type) {
    case 'image':
    case 'video':
    case 'audio':
      return contentType.startsWith(`${type}/`);
    case 'pdf':
      return contentType === 'application/pdf';
    case 'json':
      return contentType === 'application/json';
    case 'text':
      return contentType.startsWith('text/') || contentType === 'application/json';
    default:
      return false;
  }
}

/** Changes to a schema that existing objects could break on: type changes and removals. */
export function breakingChanges(before: BucketSchema, after: BucketSchema): string[] {
  const problems: string[] = [];
  for (const [field, property] of Object.entries(before.properties)) {
    const next = after.properties[field];
    if (!next) problems.push(`'${field}' cannot be removed`);
    else if (next.type !== property.type) problems.push(`'${field}' cannot change type from ${property.type} to ${next.type}`);
  }
  return problems;
}
