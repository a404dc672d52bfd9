/**
 * Arrays longer than their schema's `maxItems`, refused before the OpenAPI validator sees the body.
 * With `allErrors`, ajv validates every item of an over-long array and joins each `$ref`'d item's errors
 * to the list by copying it, so 10,000 wrong items took seconds of one event loop (quadratic in the
 * items). The length is the first thing wrong with such a body: it is reported alone, at once.
 *
 * Only the parts of a schema that can hold a `maxItems` array are walked (found once per schema), so
 * a body pays nothing for arrays the rule cannot concern.
 */
import { RequestValidationError } from '../errors.js';

type Schema = Record<string, unknown>;
type Path = Array<string | number>;

export class ArrayLimits {
  private readonly limited = new Map<Schema, boolean>();

  constructor(private readonly document: Record<string, unknown>) {}

  /** The JSON body schema of an operation of the document, when it has one. */
  bodySchema(path: string, method: string): Schema | undefined {
    const paths = this.document.paths as Record<string, Record<string, unknown>> | undefined;
    const operation = paths?.[path]?.[method.toLowerCase()] as Schema | undefined;
    const requestBody = operation && this.resolve(operation.requestBody as Schema | undefined);
    const content = requestBody?.content as Record<string, { schema?: Schema }> | undefined;
    return content?.['application/json']?.schema;
  }

  /** Throws a 422 naming the first array longer than its `maxItems`. */
  check(schema: Schema | undefined, value: unknown, loc: Path): void {
    if (!schema) return;
    const problem = this.find(schema, value, loc, 0);
    if (problem) {
      throw new RequestValidationError([{ loc: problem.loc, msg: `must NOT have more than ${problem.max} items`, type: 'maxItems' }]);
    }
  }

  private find(schemaOrRef: Schema, value: unknown, loc: Path, depth: number): { loc: Path; max: number } | undefined {
    const schema = this.resolve(schemaOrRef);
    // Deep bodies are refused elsewhere (body-checks); this walk stops well before the stack would.
    if (!schema || depth > 64 || value === null || typeof value !== 'object' || !this.canLimit(schema)) return undefined;
    if (Array.isArray(value)) {
      if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) return { loc, max: schema.maxItems };
      const items = schema.items as Schema | undefined;
      if (items && this.canLimit(items)) {
        for (let i = 0; i < value.length; i++) {
          const found = this.find(items, value[i], [...loc, i], depth + 1);
          if (found) return found;
        }
      }
    } else {
      const properties = schema.properties as Record<string, Schema> | undefined;
      for (const [name, child] of Object.entries(properties ?? {})) {
        if (!(name in value)) continue;
        const found = this.find(child, (value as Record<string, unknown>)[name], [...loc, name], depth + 1);
        if (found) return found;
      }
    }
    for (const part of (schema.allOf as Schema[] | undefined) ?? []) {
      const found = this.find(part, value, loc, depth + 1);
      if (found) return found;
    }
    return undefined;
  }

  /** Whether the schema or anything under it (properties, items, allOf) declares `maxItems`. */
  private canLimit(schemaOrRef: Schema): boolean {
    const schema = this.resolve(schemaOrRef);
    if (!schema) return false;
    const known = this.limited.get(schema);
    if (known !== undefined) return known;
    this.limited.set(schema, false); // a recursive schema finds nothing new through itself
    const children = [
      ...Object.values((schema.properties as Record<string, Schema> | undefined) ?? {}),
      ...(schema.items ? [schema.items as Schema] : []),
      ...((schema.allOf as Schema[] | undefined) ?? []),
    ];
    const result = typeof schema.maxItems === 'number' || children.some((child) => this.canLimit(child));
    this.limited.set(schema, result);
    return result;
  }

  private resolve(schema: Schema | undefined): Schema | undefined {
    let current = schema;
    for (let hops = 0; current && typeof current.$ref === 'string' && hops < 16; hops++) {
      const ref = current.$ref as string;
      if (!ref.startsWith('#/')) return undefined;
      current = ref
        .slice(2)
        .split('/')
        .reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.document) as Schema | undefined;
    }
    return current;
  }
}
