/**
 * The common request validated without express-openapi-validator's per-request work (its route lookup,
 * parameter mutator and per-request objects cost ~0.2 ms of the HTTP thread's ~1.2 ms for a saved execute at
 * full load): the operation's own schemas, compiled once by the same Ajv class with the library's options and
 * formats. It only ever accepts. A request it does not accept, or an operation it does not cover, goes
 * through the library as before, so the library's answer and its error messages stay the contract.
 *
 * Covered: requests without a query string, with a JSON body or none, on operations whose parameters are in
 * the path or in headers without defaults (the library would write a header default into the request) and
 * whose query parameters are all optional. The body is checked with `useDefaults`, as the library does, so a
 * handler sees the same defaults either way. Tests (which validate responses) run both: a request this accepts and the
 * library refuses fails the test that sent it.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import formatsPlugin from 'ajv-formats';
import { formats as libraryFormats } from 'express-openapi-validator/dist/framework/ajv/formats.js';

type Json = Record<string, unknown>;

interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  schema?: Json;
  content?: unknown;
}

interface OperationCheck {
  params: ValidateFunction | undefined;
  headers: ValidateFunction | undefined;
  body: ValidateFunction | undefined;
  bodyRequired: boolean;
}

/** What the pre-check reads of a request (its body already parsed). */
export interface PrecheckRequest {
  /** The request target's query string, if any (anything after `?`). */
  hasQuery: boolean;
  /** The request carries body bytes (a length or a transfer encoding), parsed or not. */
  hasBody: boolean;
  contentType: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  pathParams: Record<string, string>;
}

export interface PrecheckOptions {
  /** Formats the library was given (they replace its defaults of the same name). */
  formats: Record<string, { type: 'string' | 'number'; validate: (value: never) => boolean }>;
}

export class RequestPrecheck {
  private readonly ajv: Ajv2020;
  private readonly checks = new Map<string, OperationCheck | null>();

  constructor(
    private readonly apiDocument: Json,
    options: PrecheckOptions,
  ) {
    // The library's request Ajv (express-openapi-validator framework/ajv/options.js), formats in its order.
    this.ajv = new Ajv2020({
      strict: false, strictNumbers: true, strictTuples: true, allowUnionTypes: false, validateSchema: false,
      coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: true, validateFormats: true,
    });
    this.ajv.addFormat('media-range', true);
    for (const [name, format] of Object.entries(libraryFormats)) this.ajv.addFormat(name, format as never);
    // ajv-formats is CommonJS: its plugin is also the module's `default` (how the library calls it).
    (formatsPlugin as unknown as { default: (ajv: Ajv2020, options: { mode: 'full' }) => void }).default(this.ajv, { mode: 'full' });
    for (const [name, format] of Object.entries(options.formats)) this.ajv.addFormat(name, format as never);
    const schemas = ((apiDocument.components as Json | undefined)?.schemas ?? {}) as Record<string, Json>;
    for (const [id, schema] of Object.entries(schemas)) this.ajv.addSchema(schema, `#/components/schemas/${id}`);
  }

  /** True when the request certainly passes the library's validation; false when the library must decide. */
  accepts(path: string, method: string, req: PrecheckRequest): boolean {
    // A body or a media type the library would look at (and perhaps refuse: 415) must be JSON.
    if (req.hasQuery || ((req.hasBody || req.contentType !== undefined) && !isJson(req.contentType))) return false;
    const check = this.checkFor(path, method);
    if (!check) return false;
    if (check.params && !check.params(req.pathParams)) return false;
    if (check.headers && !check.headers(req.headers)) return false;
    if (req.body === undefined) return !req.hasBody && !check.bodyRequired;
    return check.body !== undefined && check.body(req.body);
  }

  private checkFor(path: string, method: string): OperationCheck | null {
    const key = `${method} ${path}`;
    let check = this.checks.get(key);
    if (check === undefined) {
      check = this.compile(path, method);
      this.checks.set(key, check);
    }
    return check;
  }

  /** The operation's checks, or null when it is not covered. */
  private compile(path: string, method: string): OperationCheck | null {
    const pathItem = (this.apiDocument.paths as Record<string, Json | undefined>)[path];
    const operation = pathItem?.[method] as Json | undefined;
    if (!pathItem || !operation) return null;
    const parameters = [...((pathItem.parameters ?? []) as Json[]), ...((operation.parameters ?? []) as Json[])].map((p) => this.resolve<Parameter>(p));
    const pathSchema: Json = { type: 'object', properties: {}, required: [] };
    const headerSchema: Json = { type: 'object', properties: {}, required: [] };
    for (const parameter of parameters) {
      if (!parameter.schema || parameter.content !== undefined) return null;
      if (parameter.in === 'query') {
        if (parameter.required) return null;
        continue;
      }
      const target = parameter.in === 'path' ? pathSchema : parameter.in === 'header' ? headerSchema : undefined;
      if (!target) return null;
      if (parameter.in === 'header' && hasDefault(parameter.schema)) return null;
      const name = parameter.in === 'header' ? parameter.name.toLowerCase() : parameter.name;
      (target.properties as Json)[name] = parameter.schema;
      if (parameter.required || parameter.in === 'path') (target.required as string[]).push(name);
    }
    const requestBody = operation.requestBody ? this.resolve<{ required?: boolean; content?: Record<string, { schema?: Json }> }>(operation.requestBody as Json) : undefined;
    const media = Object.keys(requestBody?.content ?? {});
    if (requestBody && (media.length !== 1 || media[0] !== 'application/json' || !requestBody.content!['application/json']!.schema)) return null;
    return {
      params: Object.keys(pathSchema.properties as Json).length > 0 ? this.ajv.compile(pathSchema) : undefined,
      headers: Object.keys(headerSchema.properties as Json).length > 0 ? this.ajv.compile(headerSchema) : undefined,
      body: requestBody ? this.ajv.compile(requestBody.content!['application/json']!.schema!) : undefined,
      bodyRequired: requestBody?.required === true,
    };
  }

  /** A `$ref` into this document's components, followed. */
  private resolve<T>(value: Json): T {
    const ref = value.$ref;
    if (typeof ref !== 'string') return value as T;
    let at: unknown = this.apiDocument;
    for (const part of ref.replace(/^#\//, '').split('/')) at = (at as Json | undefined)?.[part];
    if (at === undefined) throw new Error(`unresolved reference ${ref}`);
    return this.resolve<T>(at as Json);
  }
}

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

function hasDefault(schema: unknown): boolean {
  return JSON.stringify(schema).includes('"default"');
}
