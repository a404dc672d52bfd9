/**
 * json_transform: reshapes each document with a template — JSON whose string leaves are Liquid templates,
 * rendered in a sandbox (no code, no files, bounded time, allocation and output; see templates.ts).
 * Templates are parsed when the retriever is defined, so a syntax error is a 422 naming the parameter.
 */
import { InputError } from '../../../kernel/errors.js';
import { defineStage, type StageDocument, type StageParameterProblem } from '../../../kernel/plugins.js';
import {
  compileTemplate,
  describePath,
  MAX_OUTPUT_BYTES,
  RENDER_LIMIT_MS,
  renderTemplate,
  TemplateError,
  unknownVariables,
  type CompiledTemplate,
} from './templates.js';

export interface JsonTransformParameters {
  template: unknown;
  output_field?: string;
  mode?: 'merge' | 'replace';
}

/** Payload keys a template never changes: who may read the document is not the template's to say. */
const ACCESS_KEYS = ['owner_principal', 'grants'] as const;
/** Rendering time one stage run may spend in all (it yields to other work between documents). */
const STAGE_RENDER_MS = 10_000;
/** Render this long on the event loop at most before letting other work run. */
const SLICE_MS = 10;

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

function modeOf(params: JsonTransformParameters): 'field' | 'merge' | 'replace' {
  return params.output_field !== undefined ? 'field' : params.mode ?? 'merge';
}

/** A template for merge/replace must make an object: a JSON object, or one `{{ expression }}` that may. */
function canMakeObject(compiled: CompiledTemplate): boolean {
  return compiled.kind === 'object' || compiled.kind === 'typed';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** What templates see of a document: `doc.fields.x`, `doc.metadata`, `doc.score`, `doc.document_id`, ... */
function scopeOf(doc: StageDocument, rank: number, inputs: Record<string, unknown>): Record<string, unknown> {
  const payload = doc.payload ?? {};
  return {
    doc: {
      document_id: doc.document_id,
      collection_id: doc.collection_id ?? payload.collection_id ?? null,
      score: doc.score ?? null,
      rank,
      fields: payload.fields ?? {},
      metadata: payload.metadata ?? {},
      payload,
    },
    inputs,
  };
}

export default defineStage<JsonTransformParameters>({
  id: 'json_transform',
  version: '1.0',
  type: 'apply',
  description:
    'Reshapes each document with `template`: any JSON whose string leaves are Liquid templates (https://liquidjs.com), rendered ' +
    'with `doc` (`doc.fields.x`, `doc.metadata.x`, `doc.score`, `doc.document_id`, `doc.collection_id`, `doc.rank` from 1, `doc.payload`) ' +
    'and `inputs`. A leaf that is exactly one `{{ expression }}` keeps its JSON type (a number stays a number, a list a list; a missing ' +
    'value is null); other leaves render to text. With `output_field` the result goes to `payload.<output_field>`; otherwise `mode` ' +
    '`merge` (default) merges it (an object) into the payload and `replace` makes it the payload; `owner_principal` and `grants` are ' +
    'always kept. Sandboxed: no code, no files (include/render/layout do not exist), templates at most 64 KiB, ' +
    `${RENDER_LIMIT_MS} ms and bounded allocation per leaf, ${MAX_OUTPUT_BYTES / 1024} KiB of JSON out per document, ` +
    `${STAGE_RENDER_MS / 1000} s per stage run; passing a limit fails the stage with the reason. ` +
    '`{{inputs.x}}` inside templates is Liquid, not a placeholder: input text is never spliced into a template.',
  parameters: {
    type: 'object',
    required: ['template'],
    additionalProperties: false,
    properties: {
      template: { description: 'JSON whose string leaves are Liquid templates.' },
      output_field: { type: 'string', minLength: 1, maxLength: 100, pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
      mode: { enum: ['merge', 'replace'], description: 'Without output_field: merge (default) into the payload, or replace it.' },
    },
    not: { required: ['output_field', 'mode'] },
  },
  rawParameters: ['template'],
  check(params, definition) {
    let compiled: CompiledTemplate;
    try {
      compiled = compileTemplate(params.template);
    } catch (err) {
      if (err instanceof TemplateError) return [{ path: ['template', ...err.path], message: `${describePath('template', err.path)} ${err.message}` }];
      throw err;
    }
    const problems: StageParameterProblem[] = unknownVariables(compiled, definition.inputNames).map((p) => ({
      path: ['template', ...p.path],
      message: `${describePath('template', p.path)} ${p.message}`,
    }));
    if (modeOf(params) !== 'field' && !canMakeObject(compiled)) {
      problems.push({ path: ['template'], message: `mode '${modeOf(params)}' needs a template that makes an object (or give output_field)` });
    }
    return problems;
  },
  async run(ctx, docs, params) {
    if (docs.length === 0) return [];
    const mode = modeOf(params);
    let compiled: CompiledTemplate;
    try {
      compiled = compileTemplate(params.template);
    } catch (err) {
      if (err instanceof TemplateError) throw new InputError(`${describePath('template', err.path)} ${err.message}`);
      throw err;
    }
    const deadline = Math.min(Date.now() + STAGE_RENDER_MS, ctx.budget.deadline ?? Infinity);
    let sliceStart = Date.now();
    const budget = {
      deadline,
      pause: async () => {
        if (Date.now() - sliceStart < SLICE_MS) return;
        await yieldToEventLoop();
        sliceStart = Date.now();
      },
    };
    const out: StageDocument[] = [];
    for (const [index, doc] of docs.entries()) {
      let result: unknown;
      try {
        result = await renderTemplate(compiled, scopeOf(doc, index + 1, ctx.inputs), budget);
      } catch (err) {
        if (err instanceof TemplateError) throw new InputError(`${describePath('template', err.path)} ${err.message} (document ${doc.document_id})`);
        throw err;
      }
      const payload = doc.payload ?? {};
      if (mode === 'field') {
        out.push({ ...doc, payload: { ...payload, [params.output_field!]: result } });
        continue;
      }
      if (!isRecord(result)) throw new InputError(`template made ${Array.isArray(result) ? 'a list' : typeof result} for document ${doc.document_id}; mode '${mode}' needs an object`);
      const made = Object.fromEntries(Object.entries(result).filter(([k]) => !(ACCESS_KEYS as readonly string[]).includes(k)));
      const access = Object.fromEntries(ACCESS_KEYS.filter((k) => k in payload).map((k) => [k, payload[k]]));
      out.push({ ...doc, payload: mode === 'merge' ? { ...payload, ...made, ...access } : { ...made, ...access } });
    }
    return out;
  },
});
