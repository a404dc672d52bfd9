/** JSON Schemas stages share: the filter language and document field paths (deeper rules: kernel/filters). */
import { FILTER_OPERATORS } from '../filters/filter.js';
import type { JsonSchema } from '../json-schema.js';

export const FIELD_PATH_PATTERN = '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_]+)*$';

export const fieldPathSchema = { type: 'string', minLength: 1, maxLength: 200, pattern: FIELD_PATH_PATTERN } as const satisfies JsonSchema;

const item = { anyOf: [{ $ref: '#/$defs/filter_condition' }, { $ref: '#/$defs/filter_group' }] };

/**
 * Definitions to put in a stage's parameters schema under `$defs` (references resolve from the schema's
 * root); a filter property is then `filterRef`: `{AND|OR|NOT: [condition | group], case_sensitive}`.
 */
export const filterDefs: Record<string, JsonSchema> = {
  filter_condition: {
    type: 'object',
    required: ['field'],
    additionalProperties: false,
    properties: { field: fieldPathSchema, operator: { enum: [...FILTER_OPERATORS] }, value: {} },
  },
  filter_group: {
    type: 'object',
    additionalProperties: false,
    properties: { AND: { type: 'array', items: item }, OR: { type: 'array', items: item }, NOT: { type: 'array', items: item }, case_sensitive: { type: 'boolean' } },
  },
};

export const filterRef: JsonSchema = { $ref: '#/$defs/filter_group' };
