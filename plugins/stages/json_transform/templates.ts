/**
 * The sandbox json_transform renders in: Liquid (liquidjs) with no file system (`include`, `render` and
 * `layout` are not tags at all, so a template cannot name a file), own properties only (no prototype
 * walking), and liquidjs' DoS limits on every parse and render — template length, time and allocation.
 * `capture` is charged to the allocation limit too (liquidjs does not), so doubling a string in a loop
 * runs out of budget instead of memory.
 *
 * A template value is JSON whose string leaves are templates. A leaf that is exactly one `{{ expression }}`
 * keeps the expression's JSON type (a number stays a number, a list a list); any other leaf renders to text.
 */
import { CaptureTag, Liquid, Output, type Context, type Template } from 'liquidjs';

/** Template text in one parameter, all leaves together. */
export const MAX_TEMPLATE_CHARS = 64 * 1024;
/** Nesting of the template's JSON (objects and lists). */
export const MAX_TEMPLATE_DEPTH = 16;
export const MAX_TEMPLATE_LEAVES = 1000;
/** Nesting of Liquid blocks (if, for, ...) in one leaf: the parser recurses, so deep nesting is refused first. */
export const MAX_BLOCK_DEPTH = 64;
/** Serialized output per document. */
export const MAX_OUTPUT_BYTES = 64 * 1024;
/**
 * Time one leaf may render for (liquidjs checks it between template nodes). Wall-clock time, so it is
 * generous: a busy machine must not fail ordinary templates; the allocation limit stops most abuse first.
 */
export const RENDER_LIMIT_MS = 200;
/** Allocation units (characters, list items) one leaf's render may create. */
export const MEMORY_LIMIT = 4_000_000;

/** `capture` that charges what it captured to the render's allocation limit. */
class ChargedCaptureTag extends CaptureTag {
  override *render(ctx: Context): Generator<unknown, void, string> {
    yield* super.render(ctx);
    const captured = (ctx.bottom() as Record<string, unknown>)[this.variable];
    if (typeof captured === 'string') ctx.memoryLimit.use(captured.length);
  }
}

function sandboxedLiquid(keepOutputType: boolean): Liquid {
  const liquid = new Liquid({
    keepOutputType,
    ownPropertyOnly: true,
    strictFilters: true,
    parseLimit: MAX_TEMPLATE_CHARS,
    renderLimit: RENDER_LIMIT_MS,
    memoryLimit: MEMORY_LIMIT,
    // Lookups (if a tag ever asks) go to an empty in-memory map, never to the disk.
    templates: {},
  });
  for (const tag of ['include', 'render', 'layout', 'block']) delete liquid.tags[tag];
  liquid.registerTag('capture', ChargedCaptureTag);
  return liquid;
}

let engines: { text: Liquid; typed: Liquid } | undefined;
const enginesOf = () => (engines ??= { text: sandboxedLiquid(false), typed: sandboxedLiquid(true) });

export type TemplatePath = Array<string | number>;

/** A template value compiled: the same JSON shape, with string leaves parsed. */
export type CompiledTemplate =
  | { kind: 'literal'; value: unknown }
  | { kind: 'text'; source: string; templates: Template[] }
  | { kind: 'typed'; source: string; templates: Template[] }
  | { kind: 'list'; items: CompiledTemplate[] }
  | { kind: 'object'; entries: Array<[string, CompiledTemplate]> };

export class TemplateError extends Error {
  constructor(
    readonly path: TemplatePath,
    message: string,
  ) {
    super(message);
  }
}

/** `template.a[0].b` for messages. */
export function describePath(root: string, path: TemplatePath): string {
  return path.reduce<string>((s, p) => (typeof p === 'number' ? `${s}[${p}]` : `${s}.${p}`), root);
}

const BLOCK_TAGS = new Set(['if', 'unless', 'for', 'case', 'capture', 'tablerow', 'comment', 'raw']);

/** How deep `{% if %}`-like blocks nest in a template source (a cheap scan, before the recursive parser). */
function blockDepth(source: string): number {
  let depth = 0;
  let deepest = 0;
  for (const tag of source.matchAll(/\{%-?\s*([A-Za-z]+)/g)) {
    const name = tag[1]!;
    if (BLOCK_TAGS.has(name)) deepest = Math.max(deepest, ++depth);
    else if (name.startsWith('end')) depth--;
  }
  return deepest;
}

function reason(err: unknown): string {
  if (err instanceof RangeError) return 'too deeply nested';
  return err instanceof Error ? err.message : String(err);
}

/** Parses every leaf; throws a TemplateError naming the first leaf that does not parse or a limit passed. */
export function compileTemplate(value: unknown): CompiledTemplate {
  const { text, typed } = enginesOf();
  let chars = 0;
  let leaves = 0;
  const compile = (v: unknown, path: TemplatePath): CompiledTemplate => {
    if (path.length > MAX_TEMPLATE_DEPTH) throw new TemplateError(path, `nests deeper than ${MAX_TEMPLATE_DEPTH} levels`);
    if (++leaves > MAX_TEMPLATE_LEAVES) throw new TemplateError(path, `has more than ${MAX_TEMPLATE_LEAVES} values`);
    if (typeof v === 'string') {
      chars += v.length;
      if (chars > MAX_TEMPLATE_CHARS) throw new TemplateError(path, `templates are longer than ${MAX_TEMPLATE_CHARS} characters in all`);
      if (blockDepth(v) > MAX_BLOCK_DEPTH) throw new TemplateError(path, `nests blocks deeper than ${MAX_BLOCK_DEPTH} levels`);
      let templates: Template[];
      try {
        templates = text.parse(v);
      } catch (err) {
        throw new TemplateError(path, `does not parse: ${reason(err)}`);
      }
      if (templates.length === 1 && templates[0] instanceof Output) return { kind: 'typed', source: v, templates: typed.parse(v) };
      return { kind: 'text', source: v, templates };
    }
    if (Array.isArray(v)) return { kind: 'list', items: v.map((item, i) => compile(item, [...path, i])) };
    if (v !== null && typeof v === 'object') {
      return { kind: 'object', entries: Object.entries(v).map(([k, item]) => [k, compile(item, [...path, k])]) };
    }
    return { kind: 'literal', value: v };
  };
  return compile(value, []);
}

/**
 * The variables a compiled template reads that its scope does not give (anything but `doc` and `inputs`),
 * and the inputs it reads that `inputNames` does not declare.
 */
export function unknownVariables(compiled: CompiledTemplate, inputNames: readonly string[]): Array<{ path: TemplatePath; message: string }> {
  const { text } = enginesOf();
  const problems: Array<{ path: TemplatePath; message: string }> = [];
  const walk = (c: CompiledTemplate, path: TemplatePath): void => {
    if (c.kind === 'list') c.items.forEach((item, i) => walk(item, [...path, i]));
    else if (c.kind === 'object') for (const [k, item] of c.entries) walk(item, [...path, k]);
    else if (c.kind !== 'literal') {
      for (const segments of text.globalVariableSegmentsSync(c.templates)) {
        const [root, name] = segments;
        if (root !== 'doc' && root !== 'inputs') {
          problems.push({ path, message: `reads '${String(root)}', which templates do not have (they see \`doc\` and \`inputs\`)` });
        } else if (root === 'inputs' && typeof name === 'string' && !inputNames.includes(name)) {
          problems.push({ path, message: `reads input '${name}', which input_schema does not declare` });
        }
      }
    }
  };
  walk(compiled, []);
  return problems;
}

/** What a render may spend: the stage's deadline (epoch ms), and a pause between leaves to let other work run. */
export interface RenderBudget {
  deadline: number;
  /** Called before each leaf: yields to the event loop when this render has held it long enough. */
  pause(): Promise<void>;
}

/**
 * Renders a compiled template against a scope. Every leaf renders under liquidjs' limits; the result is
 * plain JSON (a missing value is null) no larger than MAX_OUTPUT_BYTES once serialized.
 */
export async function renderTemplate(compiled: CompiledTemplate, scope: Record<string, unknown>, budget: RenderBudget): Promise<unknown> {
  const { text, typed } = enginesOf();
  const render = async (c: CompiledTemplate, path: TemplatePath): Promise<unknown> => {
    switch (c.kind) {
      case 'literal':
        return c.value;
      case 'list': {
        const items: unknown[] = [];
        for (const [i, item] of c.items.entries()) items.push(await render(item, [...path, i]));
        return items;
      }
      case 'object': {
        const entries: Array<[string, unknown]> = [];
        for (const [k, item] of c.entries) entries.push([k, await render(item, [...path, k])]);
        return Object.fromEntries(entries);
      }
      default: {
        await budget.pause();
        if (Date.now() > budget.deadline) throw new TemplateError(path, 'rendering ran out of time');
        let out: unknown;
        try {
          out = (c.kind === 'typed' ? typed : text).renderSync(c.templates, scope);
        } catch (err) {
          throw new TemplateError(path, `failed: ${reason(err)}`);
        }
        // `.length` does not flatten a string built by concatenation, so a huge one is refused cheaply.
        if (typeof out === 'string' && out.length > MAX_OUTPUT_BYTES) throw new TemplateError(path, `renders more than ${MAX_OUTPUT_BYTES} bytes`);
        // A missing value is null, so the key stays in the output.
        return out === undefined ? null : out;
      }
    }
  };
  const value = await render(compiled, []);
  let json: string;
  try {
    json = JSON.stringify(value);
  } catch (err) {
    throw new TemplateError([], `does not render to JSON: ${reason(err)}`);
  }
  if (Buffer.byteLength(json) > MAX_OUTPUT_BYTES) throw new TemplateError([], `renders more than ${MAX_OUTPUT_BYTES} bytes of JSON`);
  return JSON.parse(json) as unknown;
}
