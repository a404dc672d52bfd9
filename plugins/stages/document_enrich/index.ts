/**
 * document_enrich: joins fields from another collection of the namespace by key. For each incoming
 * document, the value at `source_field` is looked up among `collection`'s documents whose `target_field`
 * equals it (compared as JSON: `1` is not `"1"`, strings case-sensitive); the first match in document id
 * order gives the values of `fields` (default: all its fields), put at `fields.<output_field>` of the
 * incoming document (an object keyed by the paths as written). A source value that is missing, null, a
 * list or an object matches nothing; `mode` `keep` (default) keeps such unmatched documents unchanged,
 * `drop` removes them.
 *
 * Access is checked as for the retriever's own collections: the other collection must be readable
 * (`read_data`) by the caller's key scopes, through `ctx.resolveCollections`. Lookups are batched (one
 * `in` query per KEY_CHUNK keys) through the DocumentSource with the caller's principal, so a user-scoped
 * key never gets another principal's document joined in.
 */
import { ServiceUnavailableError } from '../../../kernel/errors.js';
import type { ParsedFilter } from '../../../kernel/filters/filter.js';
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';
import { DocumentSource, resolve } from '../../../kernel/tokens.js';

export interface DocumentEnrichParameters {
  collection: string;
  source_field: string;
  target_field: string;
  fields?: string[];
  output_field?: string;
  mode?: 'keep' | 'drop';
}

/** Keys per lookup query (each becomes one `in` list). */
const KEY_CHUNK = 200;
/** Documents per lookup query: a key with many matches makes the next query ask again for the keys it crowded out. */
const LOOKUP_LIMIT = 2000;

type Key = string | number | boolean;
const isKey = (v: unknown): v is Key => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

function inFilter(field: string, keys: readonly Key[]): ParsedFilter {
  return { root: { kind: 'group', and: [{ kind: 'condition', field, operator: 'in', value: [...keys] }], or: [], not: [] }, caseSensitive: true };
}

export default defineStage<DocumentEnrichParameters>({
  id: 'document_enrich',
  version: '1.0',
  type: 'enrich',
  description:
    'Joins fields from another collection of the namespace (`collection`, id or name, readable by the key): each document\'s `source_field` value ' +
    'is matched against that collection\'s `target_field`; the first match (by document id) gives `fields` (default all its fields), put at ' +
    '`fields.<output_field>` (default `enrichment`). Unmatched documents are kept unchanged (`mode: keep`) or dropped (`mode: drop`). ' +
    'A user-scoped key only ever joins documents it may read.',
  parameters: {
    type: 'object',
    required: ['collection', 'source_field', 'target_field'],
    additionalProperties: false,
    properties: {
      collection: { type: 'string', minLength: 1, maxLength: 100, description: 'The collection to join from (id or name, same namespace).' },
      source_field: { ...fieldPathSchema, description: 'Path of the key in the incoming documents.' },
      target_field: { ...fieldPathSchema, description: "Path of the key in the other collection's documents." },
      fields: {
        type: 'array',
        minItems: 1,
        maxItems: 50,
        uniqueItems: true,
        items: fieldPathSchema,
        description: 'Paths to copy from the matched document (default: all its fields).',
      },
      output_field: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', default: 'enrichment' },
      mode: { enum: ['keep', 'drop'], default: 'keep', description: 'What happens to a document with no match.' },
    },
  },
  async run(ctx, docs, params) {
    if (!ctx.resolveCollections) throw new ServiceUnavailableError('document_enrich cannot check access to other collections in this execution');
    // Checked even when nothing came in, so a refused collection fails whatever the data.
    const [target] = await ctx.resolveCollections([params.collection]);
    if (docs.length === 0) return [];
    const keys = new Map<string, Key>();
    for (const doc of docs) {
      const value = readPath(doc, params.source_field);
      if (isKey(value)) keys.set(valueKey(value), value);
    }

    const source = resolve(ctx.container, DocumentSource);
    const matches = new Map<string, StageDocument>();
    const pending = [...keys.values()];
    while (pending.length > 0) {
      const chunk = pending.splice(0, KEY_CHUNK);
      const settled = matches.size;
      const found = await source.list({
        organizationId: ctx.organizationId,
        collectionIds: [target!.collection_id],
        principalId: ctx.principalId,
        filter: inFilter(params.target_field, chunk),
        limit: LOOKUP_LIMIT,
      });
      for (const doc of found) {
        const key = valueKey(readPath(doc, params.target_field));
        if (!matches.has(key)) matches.set(key, doc);
      }
      // A full page may have crowded some keys out: ask again for those (each round settles at least one key).
      if (found.length >= LOOKUP_LIMIT && matches.size > settled) pending.unshift(...chunk.filter((k) => !matches.has(valueKey(k))));
    }

    const outputField = params.output_field ?? 'enrichment';
    return docs.flatMap((doc): StageDocument[] => {
      const value = readPath(doc, params.source_field);
      const match = isKey(value) ? matches.get(valueKey(value)) : undefined;
      if (!match) return params.mode === 'drop' ? [] : [doc];
      const matchFields = (match.payload?.fields ?? {}) as Record<string, unknown>;
      const joined = params.fields
        ? Object.fromEntries(params.fields.flatMap((path) => {
          const v = readPath(match, path);
          return v === undefined ? [] : [[path, v]];
        }))
        : structuredClone(matchFields);
      const fields = (doc.payload?.fields ?? {}) as Record<string, unknown>;
      return [{ ...doc, payload: { ...doc.payload, fields: { ...fields, [outputField]: joined } } }];
    });
  },
});
