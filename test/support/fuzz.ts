/**
 * Schema-driven request generation for the fuzz test: for each operation of an OpenAPI document, requests
 * that start from a plausible valid request (real resource names where the fixtures have them) and break
 * one thing in it: a path or query parameter, the X-Namespace header, one field of the body (wrong type,
 * missing, extra, huge, boundary, hostile text, deep nesting) or the body as a whole. Deterministic for a
 * seed, so a failure can be replayed.
 */
import { seededRandom } from '../../kernel/random.js';

export type Schema = Record<string, unknown>;

export interface ApiDocument {
  paths: Record<string, Record<string, unknown>>;
  components?: { schemas?: Record<string, Schema>; parameters?: Record<string, Schema> };
}

export interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header' | 'cookie';
  required: boolean;
  schema: Schema;
}

export interface Operation {
  operationId: string;
  method: string;
  path: string;
  parameters: Parameter[];
  /** The JSON body schema, `binary` for streamed bodies, or null for none. */
  body: Schema | 'binary' | null;
  bodyRequired: boolean;
  public: boolean;
  /** Error statuses the operation documents as an HTML page for people (e.g. the search page's 404), not JSON. */
  htmlErrorStatuses: number[];
}

export interface FuzzRequest {
  operationId: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The exact bytes sent (already serialized). */
  body?: string;
  /** What was broken, in words: printed with a failure. */
  label: string;
}

/** Values the fixtures created, by parameter or body field name (e.g. `bucket_identifier`, `object_ids`). */
export type Fixtures = Record<string, readonly unknown[]>;

const METHODS = ['get', 'put', 'post', 'delete', 'patch'] as const;

/** A seeded generator (kernel/random.ts), so every run sends the same requests. */
export class Random {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = seededRandom(seed);
  }
  int(max: number): number {
    return Math.floor(this.next() * max);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)]!;
  }
}

/** A JSON token written as is (numbers JSON.stringify cannot produce: -0, 1e400, 2^64). */
class RawJson {
  constructor(readonly text: string) {}
}

/** Nesting `levels` deep, written only when the body is serialized. */
class Deep {
  constructor(
    readonly levels: number,
    readonly kind: 'array' | 'object',
  ) {}
}

/** Nested arrays or objects `levels` deep, as JSON text (never built as a value: that is the point). */
export function deepJson(levels: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? `${'['.repeat(levels)}1${']'.repeat(levels)}` : `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
}

/** JSON text of a generated value, with its raw tokens and deep nestings written in. */
export function serialize(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (value instanceof Deep) return deepJson(value.levels, value.kind);
  if (Array.isArray(value)) return `[${value.map((v: unknown) => serialize(v === undefined ? null : v)).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${serialize(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

// ---------------------------------------------------------------------------------------------------
// The document

function deref(doc: ApiDocument, schema: unknown, seen = 0): Schema {
  if (!schema || typeof schema !== 'object') return {};
  const s = schema as Schema;
  if (typeof s.$ref === 'string' && seen < 20) {
    const [, , kind, name] = s.$ref.split('/');
    const target = (doc.components as Record<string, Record<string, Schema>> | undefined)?.[kind!]?.[name!];
    return deref(doc, target, seen + 1);
  }
  return s;
}

/** Every operation of the document, with its parameters (path-level and operation-level) resolved. */
export function operationsOf(doc: ApiDocument): Operation[] {
  const list: Operation[] = [];
  for (const [route, item] of Object.entries(doc.paths)) {
    const shared = (item.parameters ?? []) as unknown[];
    for (const method of METHODS) {
      const op = item[method] as Schema | undefined;
      if (!op) continue;
      const parameters = [...shared, ...((op.parameters ?? []) as unknown[])].map((p) => {
        const param = deref(doc, p);
        return {
          name: String(param.name),
          in: param.in as Parameter['in'],
          required: param.required === true,
          schema: deref(doc, param.schema),
        };
      });
      const requestBody = deref(doc, op.requestBody);
      const content = requestBody.content as Record<string, { schema?: unknown }> | undefined;
      const body: Operation['body'] =
        op['x-body'] === 'binary' ? 'binary' : content?.['application/json'] ? deref(doc, content['application/json'].schema) : null;
      list.push({
        operationId: String(op.operationId),
        method: method.toUpperCase(),
        path: route,
        parameters,
        body,
        bodyRequired: requestBody.required === true,
        public: Array.isArray(op.security) && op.security.length === 0,
        htmlErrorStatuses: Object.entries((op.responses ?? {}) as Record<string, unknown>).flatMap(([status, response]) => {
          const content = deref(doc, response).content as Record<string, unknown> | undefined;
          return Number(status) >= 400 && content?.['text/html'] && !content['application/json'] ? [Number(status)] : [];
        }),
      });
    }
  }
  return list;
}

// ---------------------------------------------------------------------------------------------------
// Values

function typesOf(schema: Schema): string[] {
  if (Array.isArray(schema.type)) return schema.type as string[];
  if (typeof schema.type === 'string') return [schema.type];
  if (schema.properties || schema.additionalProperties) return ['object'];
  if (schema.items) return ['array'];
  if (Array.isArray(schema.enum)) return [...new Set((schema.enum as unknown[]).map((v) => (v === null ? 'null' : typeof v)))];
  return [];
}

/** base64url JSON cursors with the right encoding and the wrong content. */
export const FORGED_CURSORS: readonly string[] = [
  { t: 1, id: null },
  { s: 'created_at', d: 'desc', v: 'not a date', id: 'x' },
  { s: 'created_at', d: 'desc', v: '0000-01-01T00:00:00Z', id: 'x' },
  { s: 'created_at', d: 'desc', v: 1e308, id: 'x' },
  { s: 'created_at', d: 'desc', v: 'x', id: 'a\u0000b' },
  { s: 'size_bytes', d: 'desc', v: 'abc', id: 'x' },
  { s: 'size_bytes', d: 'desc', v: 1e308, id: 'x' },
  { s: 'document_id', d: 'asc', v: { x: 1 }, id: 'x' },
  { t: '0000-01-01T00:00:00Z', id: 'x' },
  { t: 'not a date', id: 'x' },
  { t: { $gt: '' }, id: ['a'] },
  { v: [1, 2], id: 1e308 },
  { seq: 'x' },
  { seq: 1e308 },
  { seq: -1 },
  { t: '2024-01-01T00:00:00Z', id: "x' OR '1'='1" },
  { v: null, id: 'x', s: 'key' },
  [],
  null,
  'string',
].map((v) => Buffer.from(JSON.stringify(v)).toString('base64url'))
  .concat(['!!!not-base64!!!', Buffer.from('not json').toString('base64url'), 'a'.repeat(2000)]);

export const ODD_DATE_TIMES: readonly string[] = [
  '0000-01-01T00:00:00Z',
  '2024-12-31T23:59:60Z',
  '1',
  '2024-02-30T00:00:00Z',
  '9999-12-31T23:59:59Z',
  '+275760-09-13T00:00:00Z',
  '1970-01-01T00:00:00+25:00',
  '2024-01-01',
  '',
];

export const REGEX_PATTERNS: readonly string[] = ['^(a+)+$', '\\p{L}+', '(a)\\1', '(?<n>a)\\k<n>', '[', '(?=a)', 'a{1,100000}', '\\'];

export const ODD_TEXT: readonly string[] = [
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udc00x',
  '\u202eevil',
  '\u200b',
  'e\u0301',
  '🧨💥',
  '\uffff',
  '../../../etc/passwd',
  '%00',
  "'; drop table objects; --",
  '${jndi:ldap://x}',
  '<script>alert(1)</script>',
  ' ',
  'null',
];

const BIG_STRING = 'x'.repeat(100_000);

/** Hostile values for a field of this schema: wrong types, boundaries, huge and odd content. */
function hostileValues(schema: Schema, name: string): unknown[] {
  const types = typesOf(schema);
  const out: unknown[] = [null, true, 'x', 12345, {}, [], new RawJson('-0'), new RawJson('1e400'), 1e308, -1e308, 'NaN'];
  if (types.includes('string') || types.length === 0) {
    out.push('', BIG_STRING, ...ODD_TEXT, ...REGEX_PATTERNS, ...ODD_DATE_TIMES);
    if (typeof schema.maxLength === 'number') out.push('y'.repeat(schema.maxLength + 1));
    if (/cursor/.test(name)) out.push(...FORGED_CURSORS, ...FORGED_CURSORS);
    if (schema.format === 'date-time') out.push(...ODD_DATE_TIMES, ...ODD_DATE_TIMES);
  }
  if (types.includes('integer') || types.includes('number')) {
    out.push(0, -1, 1.5, 2 ** 53 + 2, new RawJson('18446744073709551616'), '1');
    if (typeof schema.minimum === 'number') out.push(schema.minimum - 1, schema.minimum);
    if (typeof schema.maximum === 'number') out.push(schema.maximum + 1, schema.maximum);
  }
  if (types.includes('array')) {
    const item = sampleShallow(schema.items);
    out.push([null], Array.from({ length: 10_001 }, () => item), [[[]]]);
    if (typeof schema.maxItems === 'number') out.push(Array.from({ length: schema.maxItems + 1 }, () => item));
  }
  if (types.includes('object') || types.length === 0) {
    out.push(Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i])), JSON.parse('{"__proto__":{"x":1}}') as unknown, { constructor: 'x' });
  }
  out.push(new Deep(3000, 'array'), new Deep(3000, 'object'), new Deep(12_000, 'array'));
  return out;
}

function sampleShallow(schema: unknown): unknown {
  const s = (schema ?? {}) as Schema;
  const t = typesOf(s)[0];
  return t === 'string' ? 'a' : t === 'integer' || t === 'number' ? 1 : t === 'boolean' ? true : t === 'object' ? {} : null;
}

/** Values for a field without a type (filter values, metadata): the interesting ones, valid or not. */
const ANY_VALUES: readonly unknown[] = ['a', 1, true, null, ['a', 'b'], { x: 1 }, ...REGEX_PATTERNS, ...ODD_DATE_TIMES, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!'];

/** A filter condition the Filters schema cannot describe (its items are untyped): built here from its description. */
function filterCondition(rng: Random): unknown {
  const field = rng.pick(['key', 'object_id', 'created_at', 'updated_at', 'size_bytes', 'metadata.topic', 'metadata.when', 'metadata.n', 'fields.page', 'document_id']);
  const operator = rng.pick(['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'contains', 'starts_with', 'ends_with', 'exists', 'regex', 'regex', 'bogus']);
  const value =
    operator === 'regex' ? rng.pick(REGEX_PATTERNS) : operator === 'in' || operator === 'nin' ? [rng.pick(ANY_VALUES)] : /_at$/.test(field) ? rng.pick(ODD_DATE_TIMES) : rng.pick(ANY_VALUES);
  return { field, operator, value };
}

export class RequestGenerator {
  private serial = 0;

  constructor(
    private readonly doc: ApiDocument,
    private readonly rng: Random,
    private readonly fixtures: Fixtures,
    private readonly namespace: string,
  ) {}

  private fixture(name: string): unknown {
    const values = this.fixtures[name];
    return values && values.length > 0 ? this.rng.pick(values) : undefined;
  }

  /** A plausible valid value for a schema: fixtures by field name, enums, formats, required fields. */
  sample(schemaIn: unknown, name: string, depth = 0): unknown {
    const schema = deref(this.doc, schemaIn);
    const known = this.fixture(name);
    if (known !== undefined && this.rng.chance(0.8)) return known;
    if ('const' in schema) return schema.const;
    if (Array.isArray(schema.enum)) return this.rng.pick(schema.enum as unknown[]);
    for (const key of ['oneOf', 'anyOf'] as const) {
      if (Array.isArray(schema[key])) return this.sample(this.rng.pick(schema[key] as unknown[]), name, depth + 1);
    }
    if (Array.isArray(schema.allOf)) {
      return Object.assign({}, ...(schema.allOf as unknown[]).map((s) => this.sample(s, name, depth + 1)).filter((v) => v && typeof v === 'object'));
    }
    if (name === 'filters') return { [this.rng.pick(['AND', 'OR', 'NOT'])]: [filterCondition(this.rng), filterCondition(this.rng)] };
    const types = typesOf(schema).filter((t) => t !== 'null');
    const type = types.length > 0 ? this.rng.pick(types) : undefined;
    switch (type) {
      case 'object': {
        const out: Record<string, unknown> = {};
        const required = new Set((schema.required ?? []) as string[]);
        for (const [prop, propSchema] of Object.entries((schema.properties ?? {}) as Record<string, unknown>)) {
          if (/cursor/.test(prop) && !required.has(prop)) continue; // a made-up cursor is only ever refused
          if (required.has(prop) || (depth < 4 && this.rng.chance(0.35))) out[prop] = this.sample(propSchema, prop, depth + 1);
        }
        return out;
      }
      case 'array': {
        const count = Math.max(typeof schema.minItems === 'number' ? schema.minItems : 0, depth < 4 ? 1 : 0);
        return Array.from({ length: count }, () => this.sample(schema.items, `${name}[]`, depth + 1));
      }
      case 'string':
        return this.sampleString(schema, name);
      case 'integer':
        return typeof schema.minimum === 'number' ? schema.minimum : 1;
      case 'number':
        return typeof schema.minimum === 'number' ? schema.minimum : 1.5;
      case 'boolean':
        return this.rng.chance(0.5);
      default:
        return this.rng.pick(ANY_VALUES);
    }
  }

  private sampleString(schema: Schema, name: string): string {
    const n = ++this.serial;
    if (schema.format === 'date-time') return new Date(Date.UTC(2024, 0, 1 + (n % 300))).toISOString();
    if (schema.format === 'email' || /email/.test(name)) return `fuzz${n}@example.test`;
    if (schema.format === 'uri' || /url/.test(name)) return `https://example.test/${n}`;
    const min = typeof schema.minLength === 'number' ? schema.minLength : 1;
    return `fuzz${n}${'a'.repeat(Math.max(0, min - 5))}`.replace(/[^a-z0-9]/g, 'a');
  }

  /** The request with nothing broken: real names where there are fixtures. */
  private base(op: Operation): { pathParams: Record<string, string>; query: Array<[string, string]>; headers: Record<string, string>; body: unknown } {
    const pathParams: Record<string, string> = {};
    const query: Array<[string, string]> = [];
    const headers: Record<string, string> = {};
    for (const p of op.parameters) {
      if (p.in === 'path') pathParams[p.name] = String(this.sample(p.schema, p.name));
      // A made-up cursor would only ever be refused: the base request starts at the first page.
      else if (p.in === 'query' && (p.required || (!/cursor/.test(p.name) && this.rng.chance(0.3)))) {
        query.push([p.name, encodeURIComponent(String(this.sample(p.schema, p.name)))]);
      }
      else if (p.in === 'header' && p.name.toLowerCase() === 'x-namespace') headers['X-Namespace'] = this.namespace;
    }
    const body = op.body && op.body !== 'binary' ? this.sample(op.body, 'body') : undefined;
    return { pathParams, query, headers, body };
  }

  /** `count` requests for one operation, each breaking one thing (a few valid ones reach deeper code). */
  requestsFor(op: Operation, count: number): FuzzRequest[] {
    const out: FuzzRequest[] = [];
    for (let i = 0; i < count; i++) out.push(this.one(op));
    return out;
  }

  private one(op: Operation): FuzzRequest {
    const base = this.base(op);
    const targets: Array<() => string> = [() => 'valid'];
    const pathParams = op.parameters.filter((p) => p.in === 'path');
    const queryParams = op.parameters.filter((p) => p.in === 'query');
    if (pathParams.length > 0) targets.push(() => this.breakPath(base.pathParams, this.rng.pick(pathParams)));
    if (queryParams.length > 0) {
      const q = () => this.breakQuery(base.query, this.rng.pick(queryParams));
      targets.push(q, q, q);
    }
    if (this.rng.chance(0.3)) targets.push(() => this.breakQueryUnknown(base.query));
    if (op.parameters.some((p) => p.in === 'header')) targets.push(() => this.breakNamespace(base.headers));
    let rawBody: string | undefined;
    if (op.body === 'binary') {
      targets.push(() => {
        rawBody = this.rng.pick(['', 'hello', BIG_STRING, '\u0000\u0001\u0002']);
        base.headers['Content-Type'] = this.rng.pick(['application/octet-stream', 'text/plain', 'application/json', 'image/png; x=y']);
        return `binary body of ${rawBody.length} bytes, ${base.headers['Content-Type']}`;
      });
      if (op.method === 'GET') {
        targets.push(() => {
          base.headers.Range = this.rng.pick(['bytes=abc', 'bytes=5-1', 'bytes=-0', 'bytes=0-99999999999999999999', 'bytes=0-1,2-3,4-5', 'items=0-1']);
          return `Range: ${base.headers.Range}`;
        });
      }
    } else if (op.body) {
      const bodySchema = op.body;
      const field = () => this.breakBodyField(base, bodySchema);
      targets.push(field, field, field, field, field, () => {
        const whole = this.breakWholeBody(base.headers);
        rawBody = whole.body;
        return whole.label;
      });
    } else {
      targets.push(() => {
        const whole = this.breakWholeBody(base.headers);
        rawBody = whole.body;
        return `unexpected body: ${whole.label}`;
      });
    }
    const label = this.rng.pick(targets)();
    let path = op.path;
    for (const [name, value] of Object.entries(base.pathParams)) path = path.replace(`{${name}}`, value);
    if (base.query.length > 0) path += `?${base.query.map(([k, v]) => `${k}=${v}`).join('&')}`;
    if (rawBody === undefined && base.body !== undefined) {
      rawBody = serialize(base.body);
      base.headers['Content-Type'] ??= 'application/json';
    }
    return { operationId: op.operationId, method: op.method, path, headers: base.headers, ...(rawBody !== undefined ? { body: rawBody } : {}), label };
  }

  /** Path segments are sent already encoded: some are deliberately not valid percent-encoding. */
  private breakPath(params: Record<string, string>, p: Parameter): string {
    const choice = this.rng.pick([
      'x'.repeat(5000),
      '%00',
      '%FF',
      '%E0%A4%A',
      '..%2F..%2Fetc%2Fpasswd',
      '%2e%2e',
      encodeURIComponent('🧨'),
      encodeURIComponent("'; drop table objects; --"),
      '%ud800',
      '%ED%A0%80',
      '-1',
      '0',
      '1e308',
      encodeURIComponent(String(this.sample(p.schema, p.name))),
      encodeURIComponent(String(this.sample(p.schema, p.name))),
      encodeURIComponent(String(this.fixtureOther(p.name))),
    ]);
    params[p.name] = choice;
    return `path ${p.name}=${choice.length > 100 ? `${choice.slice(0, 20)}… (${choice.length} chars)` : choice}`;
  }

  /** A fixture value of a different kind (an object id where a bucket is expected). */
  private fixtureOther(name: string): unknown {
    const others = Object.entries(this.fixtures).filter(([k, v]) => k !== name && v.length > 0 && typeof v[0] === 'string');
    return others.length > 0 ? this.rng.pick(this.rng.pick(others)[1]) : 'other';
  }

  private breakQuery(query: Array<[string, string]>, p: Parameter): string {
    const types = typesOf(p.schema);
    const candidates: string[] = ['', 'x'.repeat(5000), '%00', '%FF', encodeURIComponent('🧨'), '1e308', '-0', 'NaN', '1.5', '9'.repeat(40)];
    if (types.includes('integer') || types.includes('number')) {
      candidates.push('0', '-1', 'abc');
      if (typeof p.schema.maximum === 'number') candidates.push(String(p.schema.maximum + 1));
      if (typeof p.schema.minimum === 'number') candidates.push(String(p.schema.minimum - 1));
    }
    if (/cursor/.test(p.name)) candidates.push(...FORGED_CURSORS, ...FORGED_CURSORS);
    if (p.schema.format === 'date-time' || /^(start|end|since|until|from|to)/.test(p.name)) candidates.push(...ODD_DATE_TIMES.map(encodeURIComponent), ...ODD_DATE_TIMES.map(encodeURIComponent));
    candidates.push(...REGEX_PATTERNS.map(encodeURIComponent));
    const value = this.rng.pick(candidates);
    const rest = query.filter(([k]) => k !== p.name);
    rest.push([p.name, value]);
    if (this.rng.chance(0.15)) rest.push([p.name, value]);
    query.splice(0, query.length, ...rest);
    return `query ${p.name}=${value.length > 100 ? `${value.slice(0, 20)}… (${value.length} chars)` : value}`;
  }

  private breakQueryUnknown(query: Array<[string, string]>): string {
    query.push(['fuzz_unknown', '1']);
    return 'unknown query parameter';
  }

  private breakNamespace(headers: Record<string, string>): string {
    const value = this.rng.pick([undefined, 'does-not-exist', 'x'.repeat(5000), '../fuzz', 'caf\u00e9', ' fuzz ', 'ns_00000000000000000000000000', '']);
    if (value === undefined) delete headers['X-Namespace'];
    else headers['X-Namespace'] = value;
    return `X-Namespace ${value === undefined ? 'missing' : JSON.stringify(value.length > 100 ? `${value.slice(0, 20)}…` : value)}`;
  }

  /** Replaces, removes or adds one field somewhere in the body, guided by the schema. */
  private breakBodyField(base: { body: unknown }, bodySchema: Schema): string {
    if (!base.body || typeof base.body !== 'object' || Array.isArray(base.body)) {
      base.body = this.rng.pick(hostileValues(bodySchema, 'body'));
      return 'body replaced by a hostile value';
    }
    const slots = this.slots(base.body as Record<string, unknown>, bodySchema, []);
    const slot = this.rng.pick(slots);
    const parent = slot.path.slice(0, -1).reduce<unknown>((v, k) => (v as Record<string | number, unknown>)[k], base.body) as Record<string | number, unknown>;
    const key = slot.path[slot.path.length - 1]!;
    const action = this.rng.pick(['hostile', 'hostile', 'hostile', 'missing', 'extra']);
    const where = slot.path.join('.');
    if (action === 'missing' && slot.present) {
      delete parent[key];
      return `body ${where} removed`;
    }
    if (action === 'extra') {
      const target = parent[key] && typeof parent[key] === 'object' && !Array.isArray(parent[key]) ? (parent[key] as Record<string, unknown>) : parent;
      target.fuzz_extra = this.rng.pick(ANY_VALUES);
      return `body ${where} with an extra field`;
    }
    const value = this.rng.pick(hostileValues(slot.schema, String(key)));
    parent[key] = value;
    return `body ${where} = ${describe(value)}`;
  }

  /** Every field the schema names below `value` (present or not), with its schema. */
  private slots(value: Record<string, unknown>, schemaIn: unknown, path: Array<string | number>, depth = 0): Array<{ path: Array<string | number>; schema: Schema; present: boolean }> {
    const schema = deref(this.doc, schemaIn);
    const out: Array<{ path: Array<string | number>; schema: Schema; present: boolean }> = [];
    const props = (schema.properties ?? {}) as Record<string, unknown>;
    for (const [name, propSchema] of Object.entries(props)) {
      const resolved = deref(this.doc, propSchema);
      out.push({ path: [...path, name], schema: resolved, present: name in value });
      const child = value[name];
      if (depth < 4 && child && typeof child === 'object' && !Array.isArray(child)) out.push(...this.slots(child as Record<string, unknown>, resolved, [...path, name], depth + 1));
      if (depth < 4 && Array.isArray(child) && child.length > 0) {
        const itemSchema = deref(this.doc, resolved.items);
        out.push({ path: [...path, name, 0], schema: itemSchema, present: true });
        if (child[0] && typeof child[0] === 'object' && !Array.isArray(child[0])) out.push(...this.slots(child[0] as Record<string, unknown>, itemSchema, [...path, name, 0], depth + 1));
      }
    }
    if (out.length === 0) out.push(...Object.keys(value).map((k) => ({ path: [...path, k], schema: {} as Schema, present: true })));
    if (out.length === 0) out.push({ path: [...path, 'fuzz_extra'], schema: {}, present: false });
    return out;
  }

  private breakWholeBody(headers: Record<string, string>): { body: string; label: string } {
    const choice = this.rng.pick([
      ['{', 'invalid JSON'],
      ['', 'empty body'],
      ['null', 'JSON null'],
      ['42', 'JSON number'],
      ['"s"', 'JSON string'],
      ['[]', 'JSON array'],
      [deepJson(3000, 'array'), '3000-level nested arrays'],
      [deepJson(3000, 'object'), '3000-level nested objects'],
      [deepJson(12_000, 'array'), '12000-level nested arrays'],
      [deepJson(12_000, 'object'), '12000-level nested objects'],
      ['{"a":1,"a":2}', 'duplicate keys'],
      ['{"__proto__":{"polluted":true}}', '__proto__ key'],
      ['\ufeff{}', 'BOM before JSON'],
      [`{"k":"${'\\ud800'}"}`, 'escaped lone surrogate'],
    ] as const);
    const [body, label] = choice;
    const contentType = this.rng.pick(['application/json', 'application/json', 'application/json', 'text/plain', 'application/json; charset=utf-16', 'application/x-www-form-urlencoded']);
    headers['Content-Type'] = contentType;
    return { body, label: `${label} as ${contentType}` };
  }
}

function describe(value: unknown): string {
  if (value instanceof Deep) return `${value.levels}-level nested ${value.kind}s`;
  if (value instanceof RawJson) return value.text;
  if (typeof value === 'string') return value.length > 60 ? `${JSON.stringify(value.slice(0, 20))}… (${value.length} chars)` : JSON.stringify(value);
  if (Array.isArray(value)) return value.length > 20 ? `array of ${value.length}` : JSON.stringify(value);
  if (value && typeof value === 'object') {
    const keys = Object.keys(value);
    return keys.length > 20 ? `object with ${keys.length} keys` : JSON.stringify(value);
  }
  return String(value);
}

// ---------------------------------------------------------------------------------------------------
// Verdicts

const ERROR_KEYS = new Set(['success', 'status', 'error']);
const ERROR_DETAIL_KEYS = new Set(['message', 'type', 'details']);
const PROBLEM_KEYS = new Set(['loc', 'msg', 'type']);

/** Why a 4xx/5xx body is not exactly ErrorResponse or HTTPValidationError (422), or null when it is. */
export function errorShapeProblem(status: number, text: string): string | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `error body is not JSON: ${JSON.stringify(text.slice(0, 200))}`;
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return 'error body is not an object';
  const b = body as Record<string, unknown>;
  if ('detail' in b) {
    if (status !== 422) return `HTTPValidationError with status ${status} (only 422 uses it)`;
    if (Object.keys(b).length !== 1) return `HTTPValidationError with extra keys ${Object.keys(b).join(', ')}`;
    if (!Array.isArray(b.detail) || b.detail.length === 0) return 'HTTPValidationError.detail is not a non-empty array';
    for (const item of b.detail as unknown[]) {
      if (!item || typeof item !== 'object') return 'a detail item is not an object';
      const p = item as Record<string, unknown>;
      if (Object.keys(p).some((k) => !PROBLEM_KEYS.has(k))) return `a detail item has keys ${Object.keys(p).join(', ')}`;
      if (!Array.isArray(p.loc) || !p.loc.every((l) => typeof l === 'string' || typeof l === 'number')) return 'detail.loc is not a list of strings and numbers';
      if (typeof p.msg !== 'string' || typeof p.type !== 'string') return 'detail.msg or detail.type is not a string';
    }
    return null;
  }
  if (Object.keys(b).some((k) => !ERROR_KEYS.has(k))) return `ErrorResponse with keys ${Object.keys(b).join(', ')}`;
  if (b.success !== false) return 'ErrorResponse.success is not false';
  if (b.status !== status) return `ErrorResponse.status ${String(b.status)} differs from the HTTP status ${status}`;
  const e = b.error as Record<string, unknown> | undefined;
  if (!e || typeof e !== 'object' || Array.isArray(e)) return 'ErrorResponse.error is not an object';
  if (Object.keys(e).some((k) => !ERROR_DETAIL_KEYS.has(k))) return `ErrorResponse.error has keys ${Object.keys(e).join(', ')}`;
  if (typeof e.message !== 'string' || typeof e.type !== 'string') return 'ErrorResponse.error.message or .type is not a string';
  if ('details' in e && (!e.details || typeof e.details !== 'object' || Array.isArray(e.details))) return 'ErrorResponse.error.details is not an object';
  return null;
}

/** One line that replays the request: method, path, headers that matter, and the body (shortened if huge). */
export function describeRequest(r: FuzzRequest): string {
  const headers = Object.entries(r.headers)
    .map(([k, v]) => `${k}: ${v.length > 80 ? `${v.slice(0, 40)}… (${v.length} chars)` : v}`)
    .join('; ');
  const body = r.body === undefined ? '(no body)' : r.body.length > 400 ? `${r.body.slice(0, 200)}… (${r.body.length} bytes)` : r.body;
  const path = r.path.length > 300 ? `${r.path.slice(0, 200)}… (${r.path.length} chars)` : r.path;
  return `${r.method} ${path} [${r.label}] headers {${headers}} body ${body}`;
}
