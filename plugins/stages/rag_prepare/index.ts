/**
 * rag_prepare: builds the context a language model is given from the documents it receives, in rank
 * order, numbered [1], [2], ... so an answer's citations lead back to document ids — within a token
 * budget counted with the model's tokenizer (tokens.ts). What it produces counts into the execution's
 * `max_llm_tokens`: its budget is the smaller of `max_tokens` and what that limit leaves, and when the
 * limit (not `max_tokens`) makes it leave something out it says so, and the execution stops there.
 */
import { defineStage, type StageDocument, type StageParameterProblem } from '../../../kernel/plugins.js';
import { readPath } from '../../../kernel/retrieval/documents.js';
import { fieldPathSchema } from '../../../kernel/retrieval/schemas.js';
import { ENCODINGS, tokenCounter, type EncodingName, type Pause, type TokenCounter } from './tokens.js';

export interface RagPrepareParameters {
  max_tokens?: number;
  text_fields?: string[];
  template?: string;
  separator?: string;
  truncate?: boolean;
  output_mode?: 'context' | 'documents';
  encoding?: EncodingName;
}

export interface Citation {
  n: number;
  document_id: string;
  collection_id: string | null;
  score: number | null;
}

/** The id of the one document `output_mode: context` makes. */
export const CONTEXT_DOCUMENT_ID = 'rag_context';

const DEFAULTS = {
  max_tokens: 4000,
  text_fields: ['text'],
  template: '[{n}] {text}',
  separator: '\n\n',
  truncate: true,
  output_mode: 'context',
  encoding: 'o200k_base',
} as const;

const TEMPLATE_KEYS = ['n', 'text', 'document_id', 'collection_id', 'score'] as const;
const TEMPLATE_TOKEN = /\{([A-Za-z_][A-Za-z0-9_]*)\}/g;
/** Text read from one document at most (the budget decides how much of it is used). */
const MAX_TEXT_CHARS = 1_000_000;
/** Work this long on the event loop at most before letting other work run. */
const SLICE_MS = 10;

const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A Pause that lets other work run once SLICE_MS have passed since it last did (counting may take a while). */
function timeSlices(): Pause {
  let sliceStart = Date.now();
  return () => {
    if (Date.now() - sliceStart <= SLICE_MS) return;
    return yieldToEventLoop().then(() => {
      sliceStart = Date.now();
    });
  };
}

/** A document's text: its `text_fields`, in order, joined by new lines (lists by new lines, objects as JSON). */
function textOf(doc: StageDocument, fields: readonly string[]): string {
  const parts: string[] = [];
  const add = (value: unknown): void => {
    if (value === undefined || value === null || value === '') return;
    if (Array.isArray(value)) value.forEach(add);
    else parts.push(typeof value === 'object' ? JSON.stringify(value) : String(value));
  };
  for (const field of fields) add(readPath(doc, field));
  const text = parts.join('\n');
  return text.length > MAX_TEXT_CHARS ? text.slice(0, MAX_TEXT_CHARS) : text;
}

/** The template with its `{key}`s filled in one pass (so a `{n}` inside a document's text stays text). */
function format(template: string, values: Record<string, string>): string {
  return template.replace(TEMPLATE_TOKEN, (token, key: string) => values[key] ?? token);
}

interface Entry {
  doc: StageDocument;
  n: number;
  /** The entry as it appears in the context (without the separator before it). */
  text: string;
  /** Tokens of the entry with the separator before it (none before the first). */
  tokens: number;
  truncated: boolean;
}

/**
 * Fits one document's entry into `remaining` tokens: whole, or with its text cut when `truncate` allows.
 * Undefined when nothing of it fits.
 */
async function fitEntry(counter: TokenCounter, pause: Pause, template: string, prefix: string, doc: StageDocument, n: number, text: string, remaining: number, truncate: boolean) {
  const values = (t: string) => ({
    n: String(n),
    text: t,
    document_id: doc.document_id,
    collection_id: doc.collection_id ?? '',
    score: typeof doc.score === 'number' ? String(Math.round(doc.score * 10_000) / 10_000) : '',
  });
  const whole = format(template, values(text));
  const fit = await counter.headAsync(prefix + whole, remaining, pause);
  if (fit.whole) return { text: whole, tokens: fit.tokens, truncated: false };
  if (!truncate) return undefined;
  // Cut the text, not the template: the number and any source line stay.
  let textBudget = remaining - (await counter.countAsync(prefix + format(template, values('')), pause));
  let best: { text: string; tokens: number; truncated: true } | undefined;
  for (let attempt = 0; attempt < 8 && textBudget > 0; attempt++) {
    const cut = await counter.headAsync(text, textBudget, pause);
    if (cut.tokens === 0) break;
    const entry = format(template, values(cut.text));
    const tokens = await counter.countAsync(prefix + entry, pause);
    if (tokens > remaining) {
      if (best) break;
      textBudget = cut.tokens - (tokens - remaining);
      continue;
    }
    if (!best || tokens > best.tokens) best = { text: entry, tokens, truncated: true };
    if (tokens === remaining) break;
    // The text's tokens were counted apart from the template's and may merge with them: use what is left.
    const nextBudget = cut.tokens + (remaining - tokens);
    if (nextBudget === textBudget) break; // the same budget would give the same cut again
    textBudget = nextBudget;
  }
  return best;
}

export default defineStage<RagPrepareParameters>({
  id: 'rag_prepare',
  version: '1.0',
  type: 'reduce',
  description:
    'Builds a language-model context from the documents it receives, in rank order, within `max_tokens` (default 4000) counted ' +
    'with `encoding` (`o200k_base`, default, or `cl100k_base`). Each document becomes `template` (default `[{n}] {text}`; keys ' +
    '`{n}` citation number from 1, `{text}`, `{document_id}`, `{collection_id}`, `{score}`), its text being `text_fields` (default ' +
    '`["text"]`) joined by new lines; documents without text are left out. Entries are joined by `separator` (default a blank ' +
    'line). A document that does not fit is cut to the room left and ends the context when `truncate` (default true), else it is ' +
    'skipped and later, shorter ones may still fit. `output_mode` `context` (default) returns one document `rag_context` whose ' +
    'payload has `context`, `citations` [{n, document_id, collection_id, score}], `token_count`, `max_tokens`, `encoding` and ' +
    '`truncated`; `documents` returns the documents that fit with `payload.citation` (n), `payload.context_entry`, ' +
    '`payload.context_tokens` and `payload.context_truncated`. The tokens count into `budget_limits.max_llm_tokens`: the budget is ' +
    'the smaller of `max_tokens` and what that limit leaves, and when that limit makes it leave content out the execution stops ' +
    'with `budget_exceeded` after this stage.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: {
      max_tokens: { type: 'integer', minimum: 1, maximum: 1_000_000, default: DEFAULTS.max_tokens },
      text_fields: { type: 'array', minItems: 1, maxItems: 20, items: fieldPathSchema, default: [...DEFAULTS.text_fields] },
      template: { type: 'string', minLength: 1, maxLength: 2000, default: DEFAULTS.template },
      separator: { type: 'string', maxLength: 100, default: DEFAULTS.separator },
      truncate: { type: 'boolean', default: DEFAULTS.truncate },
      output_mode: { enum: ['context', 'documents'], default: DEFAULTS.output_mode },
      encoding: { enum: [...ENCODINGS], default: DEFAULTS.encoding },
    },
  },
  check(params) {
    const problems: StageParameterProblem[] = [];
    for (const match of (params.template ?? DEFAULTS.template).matchAll(TEMPLATE_TOKEN)) {
      if (!(TEMPLATE_KEYS as readonly string[]).includes(match[1]!)) {
        problems.push({ path: ['template'], message: `unknown key '{${match[1]}}' in template; keys are ${TEMPLATE_KEYS.map((k) => `{${k}}`).join(', ')}` });
      }
    }
    return problems;
  },
  async run(ctx, docs, params) {
    if (docs.length === 0) return [];
    const p = { ...DEFAULTS, ...params };
    const counter = await tokenCounter(p.encoding);
    const budget = ctx.budget;
    const llmLeft = typeof budget.maxLlmTokens === 'number' ? Math.max(0, budget.maxLlmTokens - (budget.llmTokens ?? 0)) : Infinity;
    const limit = Math.min(p.max_tokens, llmLeft);

    const entries: Entry[] = [];
    let used = 0;
    let leftOut = false;
    const pause = timeSlices();
    for (const doc of docs) {
      await pause();
      const text = textOf(doc, p.text_fields);
      if (text === '') continue;
      const fit = used < limit
        ? await fitEntry(counter, pause, p.template, entries.length > 0 ? p.separator : '', doc, entries.length + 1, text, limit - used, p.truncate)
        : undefined;
      if (!fit) {
        leftOut = true;
        if (p.truncate) break;
        continue;
      }
      entries.push({ doc, n: entries.length + 1, ...fit });
      used += fit.tokens;
      if (fit.truncated) {
        leftOut = true;
        break;
      }
    }

    // Entries were counted one by one; the context is counted whole (the number the model sees) and
    // trimmed in the rare case joining made it longer than the budget.
    let context = entries.map((e, i) => (i > 0 ? p.separator : '') + e.text).join('');
    let tokenCount = await counter.countAsync(context, pause);
    while (tokenCount > limit && entries.length > 0) {
      entries.pop();
      leftOut = true;
      context = entries.map((e, i) => (i > 0 ? p.separator : '') + e.text).join('');
      tokenCount = await counter.countAsync(context, pause);
    }

    budget.llmTokens = (budget.llmTokens ?? 0) + tokenCount;
    if (leftOut && llmLeft < p.max_tokens) budget.llmLimitReached = true;

    if (p.output_mode === 'documents') {
      return entries.map((e) => ({
        ...e.doc,
        payload: { ...e.doc.payload, citation: e.n, context_entry: e.text, context_tokens: e.tokens, context_truncated: e.truncated },
      }));
    }
    const citations: Citation[] = entries.map((e) => ({
      n: e.n,
      document_id: e.doc.document_id,
      collection_id: e.doc.collection_id ?? null,
      score: typeof e.doc.score === 'number' ? e.doc.score : null,
    }));
    return [{
      document_id: CONTEXT_DOCUMENT_ID,
      payload: { context, citations, token_count: tokenCount, max_tokens: limit, encoding: p.encoding, truncated: leftOut },
    }];
  },
});
