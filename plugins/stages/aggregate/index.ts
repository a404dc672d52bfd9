/**
 * aggregate: summarises the documents it receives, optionally per group, into result documents.
 *
 * - `group_by` (a field path or a list of them): one result per combination of values, in the order of
 *   each group's first (highest-ranked) document; missing and null are one value (null). Without it, one
 *   result for everything received — also when nothing was received (count 0).
 * - `aggregations[]`: `count` (documents; with `field`, documents whose field is present and not null),
 *   `sum` and `avg` (of the numeric values; others are ignored; sum of none is 0, avg of none null),
 *   `min` and `max` (of the numbers, or of the strings when the group has no numbers; null when neither),
 *   `distinct` (the distinct values in first-seen order, compared as JSON, at most MAX_DISTINCT).
 *   Each result is stored under `alias` (default `<function>` or `<function>_<field with _ for .>`).
 *
 * A result is a synthetic document: `document_id` `agg_<hash of the group key>` (stable across runs and
 * pages), no collection, no score, and a payload `{group_key, group, aggregations}` where `group` maps each
 * group_by path to its value and `group_key` is that value (a list for several paths, null without
 * group_by). Only what the stage received is counted, so a user-scoped key's results never include another
 * principal's documents.
 */
import { createHash } from 'node:crypto';
import { InputError } from '../../../kernel/errors.js';
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';
import { readPath, valueKey } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';

export const AGGREGATE_FUNCTIONS = ['count', 'sum', 'avg', 'min', 'max', 'distinct'] as const;
export type AggregateFunction = (typeof AGGREGATE_FUNCTIONS)[number];

export interface Aggregation {
  function: AggregateFunction;
  field?: string;
  alias?: string;
}

export interface AggregateParameters {
  aggregations: Aggregation[];
  group_by?: string | string[];
}

export const MAX_DISTINCT = 1000;
export const AGGREGATE_ID_PREFIX = 'agg_';

const present = (v: unknown) => v !== undefined && v !== null;

export function aliasOf(aggregation: Aggregation): string {
  return aggregation.alias ?? (aggregation.field ? `${aggregation.function}_${aggregation.field.replace(/\./g, '_')}` : aggregation.function);
}

function extreme(values: readonly unknown[], pick: 'min' | 'max'): number | string | null {
  const numbers = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (numbers.length > 0) return numbers.reduce((a, b) => (pick === 'min' ? Math.min(a, b) : Math.max(a, b)));
  const strings = values.filter((v): v is string => typeof v === 'string');
  if (strings.length === 0) return null;
  return strings.reduce((a, b) => ((pick === 'min' ? b < a : b > a) ? b : a));
}

function compute(aggregation: Aggregation, members: readonly StageDocument[]): unknown {
  const values = aggregation.field ? members.map((d) => readPath(d, aggregation.field!)) : [];
  switch (aggregation.function) {
    case 'count':
      return aggregation.field ? values.filter(present).length : members.length;
    case 'sum':
    case 'avg': {
      const numbers = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
      const sum = numbers.reduce((a, b) => a + b, 0);
      if (aggregation.function === 'sum') return sum;
      return numbers.length === 0 ? null : sum / numbers.length;
    }
    case 'min':
    case 'max':
      return extreme(values, aggregation.function);
    case 'distinct': {
      const seen = new Map<string, unknown>();
      for (const v of values) {
        if (seen.size >= MAX_DISTINCT) break;
        const key = valueKey(v);
        if (!seen.has(key)) seen.set(key, v ?? null);
      }
      return [...seen.values()];
    }
  }
}

const aggregationSchema = {
  type: 'object',
  required: ['function'],
  additionalProperties: false,
  properties: {
    function: { enum: [...AGGREGATE_FUNCTIONS] },
    field: { ...fieldPathSchema, description: 'The field path to aggregate (required except for count).' },
    alias: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][A-Za-z0-9_]*$', description: 'The name of the result in payload.aggregations.' },
  },
  if: { properties: { function: { not: { const: 'count' } } } },
  then: { required: ['field'] },
};

export default defineStage<AggregateParameters>({
  id: 'aggregate',
  version: '1.0',
  type: 'reduce',
  description:
    'Summarises the documents received into one result document per group (group_by: a field path or a list; without it, one result in all). ' +
    'aggregations: count, sum, avg, min, max, distinct over a field, each under its alias in payload.aggregations; payload.group maps each ' +
    `group_by path to the group's value. Results have ids agg_<hash of the group key>, no collection and no score; distinct keeps at most ${MAX_DISTINCT} values.`,
  parameters: {
    type: 'object',
    required: ['aggregations'],
    additionalProperties: false,
    properties: {
      aggregations: { type: 'array', minItems: 1, maxItems: 50, items: aggregationSchema },
      group_by: {
        oneOf: [fieldPathSchema, { type: 'array', minItems: 1, maxItems: 10, uniqueItems: true, items: fieldPathSchema }],
      },
    },
  },
  async run(_ctx, docs, params) {
    const aliases = params.aggregations.map(aliasOf);
    const twice = aliases.find((a, i) => aliases.indexOf(a) !== i);
    if (twice) throw new InputError(`two aggregations are named '${twice}': give one an alias`, { alias: twice });
    const paths = params.group_by === undefined ? [] : typeof params.group_by === 'string' ? [params.group_by] : params.group_by;

    const groups = new Map<string, { values: unknown[]; members: StageDocument[] }>();
    if (paths.length === 0) groups.set(valueKey([]), { values: [], members: [] });
    for (const doc of docs) {
      const values = paths.map((p) => readPath(doc, p) ?? null);
      const key = valueKey(values);
      const group = groups.get(key);
      if (group) group.members.push(doc);
      else groups.set(key, { values, members: [doc] });
    }
    return [...groups].map(([key, { values, members }]): StageDocument => ({
      document_id: `${AGGREGATE_ID_PREFIX}${createHash('sha256').update(key).digest('hex').slice(0, 24)}`,
      payload: {
        group_key: paths.length === 0 ? null : typeof params.group_by === 'string' ? values[0] : values,
        group: Object.fromEntries(paths.map((p, i) => [p, values[i]])),
        aggregations: Object.fromEntries(params.aggregations.map((a, i) => [aliases[i]!, compute(a, members)])),
      },
    }));
  },
});
