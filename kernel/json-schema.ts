/** A JSON Schema document (draft 2020-12 as ajv reads it). */
export type JsonSchema = { [keyword: string]: unknown } | boolean;
