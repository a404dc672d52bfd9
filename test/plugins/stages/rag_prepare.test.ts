import { describe, expect, it } from 'vitest';
import stage, { CONTEXT_DOCUMENT_ID } from '../../../plugins/stages/rag_prepare/index.js';
import { segments, tokenCounter } from '../../../plugins/stages/rag_prepare/tokens.js';
import type { StageBudget, StageContext, StageDocument } from '../../../kernel/plugins.js';
import { runStageContract } from '../../support/stage-contract.js';

runStageContract(stage, {
  valid: [
    { output_mode: 'documents', max_tokens: 40 },
    {},
    { max_tokens: 10, text_fields: ['text', 'metadata.title'], template: '{n}. {text} ({document_id}, {collection_id}, {score})', separator: '\n', truncate: false, output_mode: 'context', encoding: 'cl100k_base' },
  ],
  invalid: [{ max_tokens: 0 }, { max_tokens: 1.5 }, { output_mode: 'answer' }, { text_fields: [] }, { text_fields: ['a..b'] }, { encoding: 'gpt2' }, { template: '' }, { limit: 3 }],
});

interface ContextPayload {
  context: string;
  citations: Array<{ n: number; document_id: string; collection_id: string | null; score: number | null }>;
  token_count: number;
  max_tokens: number;
  truncated: boolean;
}

describe('rag_prepare', () => {
  const budgetOf = (more: Partial<StageBudget> = {}): StageBudget => ({
    maxCredits: null, maxTimeMs: null, creditsUsed: 0, deadline: null, maxInferenceCalls: null, inferenceCalls: 0, ...more,
  });
  const ctxOf = (budget = budgetOf()) => ({ inputs: {}, budget }) as unknown as StageContext;
  const doc = (id: string, text: string, score: number): StageDocument => ({
    document_id: id, collection_id: 'col_x', score, payload: { owner_principal: 'bob', fields: { text }, metadata: {} },
  });
  // Ranked as a search would return them.
  const docs = [doc('a', 'hello world', 0.9), doc('b', 'The quick brown fox', 0.5), doc('c', 'jumps over the lazy dog', 0.2)];
  const contextOf = async (params: Record<string, unknown>, input = docs, ctx = ctxOf()) => {
    const out = await stage.run(ctx, input, params as never);
    expect(out).toHaveLength(1);
    expect(out[0]!.document_id).toBe(CONTEXT_DOCUMENT_ID);
    return out[0]!.payload as unknown as ContextPayload;
  };

  it('counts tokens as the model does (known ids of cl100k_base and o200k_base)', async () => {
    expect((await tokenCounter('cl100k_base')).encode('hello world')).toEqual([15339, 1917]);
    expect((await tokenCounter('o200k_base')).encode('hello world')).toEqual([24912, 2375]);
  });

  // Hand-computed: each common lower-case word with its leading space is one token, `[`, the digit and `]`
  // are one each, and the blank line between entries is one: "[1] hello world" = [ 1 ] ␣hello ␣world = 5;
  // "\n\n[2] The quick brown fox" = \n\n [ 2 ] ␣The ␣quick ␣brown ␣fox = 8; "\n\n[3] jumps over the lazy
  // dog" = 9. All three: 22.
  it('builds the numbered context within the budget, citations in rank order pointing to the documents', async () => {
    const all = await contextOf({ max_tokens: 100 });
    expect(all.context).toBe('[1] hello world\n\n[2] The quick brown fox\n\n[3] jumps over the lazy dog');
    expect(all.token_count).toBe(22);
    expect(all.truncated).toBe(false);
    expect(all.citations).toEqual([
      { n: 1, document_id: 'a', collection_id: 'col_x', score: 0.9 },
      { n: 2, document_id: 'b', collection_id: 'col_x', score: 0.5 },
      { n: 3, document_id: 'c', collection_id: 'col_x', score: 0.2 },
    ]);

    const two = await contextOf({ max_tokens: 13 });
    expect(two).toMatchObject({ context: '[1] hello world\n\n[2] The quick brown fox', token_count: 13, truncated: true });
    expect(two.citations.map((c) => c.document_id)).toEqual(['a', 'b']);
  });

  it('cuts the text of the document that does not fit (not the template), or skips it', async () => {
    // 19 tokens: 13 for the first two, then "\n\n[3] jumps over" = 6.
    const cut = await contextOf({ max_tokens: 19 });
    expect(cut).toMatchObject({ context: '[1] hello world\n\n[2] The quick brown fox\n\n[3] jumps over', token_count: 19, truncated: true });
    // Three tokens left cannot hold "\n\n[3] " and any text: the document is left out, not cited.
    const none = await contextOf({ max_tokens: 16 });
    expect(none.citations).toHaveLength(2);
    expect(none.token_count).toBe(13);

    const long = doc('long', 'lorem ipsum dolor sit amet '.repeat(20), 0.95);
    const skipped = await contextOf({ max_tokens: 10, truncate: false }, [long, ...docs]);
    expect(skipped).toMatchObject({ context: '[1] hello world', token_count: 5, truncated: true });
    expect(skipped.citations).toEqual([{ n: 1, document_id: 'a', collection_id: 'col_x', score: 0.9 }]);
    const truncated = await contextOf({ max_tokens: 10, truncate: true }, [long, ...docs]);
    expect(truncated.citations.map((c) => c.document_id)).toEqual(['long']);
    expect(truncated.token_count).toBe(10);
    expect(truncated.context).toMatch(/^\[1\] lorem ipsum/);
  });

  it('formats entries with their keys in one pass, reading text_fields in order', async () => {
    const d: StageDocument = { document_id: 'd1', collection_id: 'col_y', score: 0.123456, payload: { fields: { text: 'uses {n} literally', title: 'T' }, metadata: { src: 'web' } } };
    const out = await contextOf({ template: '{n}: {text} ({document_id} in {collection_id}, {score})', text_fields: ['title', 'text', 'metadata.src', 'missing'] }, [d]);
    expect(out.context).toBe('1: T\nuses {n} literally\nweb (d1 in col_y, 0.1235)');
    const check = (template: string) => stage.check!({ template } as never, { inputNames: [] }).map((p) => p.message);
    expect(check('{n}. {title}')).toEqual([expect.stringContaining("unknown key '{title}'")]);
    expect(check('{{inputs.q}} [{n}] {text}')).toEqual([]);
  });

  it('in documents mode returns the documents that fit, each with its citation', async () => {
    const out = await stage.run(ctxOf(), [doc('x', '', 1), ...docs], { max_tokens: 13, output_mode: 'documents' } as never);
    expect(out.map((d) => [d.document_id, d.payload!.citation, d.payload!.context_entry, d.payload!.context_tokens, d.payload!.context_truncated])).toEqual([
      ['a', 1, '[1] hello world', 5, false],
      ['b', 2, '[2] The quick brown fox', 8, false],
    ]);
    expect(out[0]).toMatchObject({ collection_id: 'col_x', score: 0.9, payload: { owner_principal: 'bob', fields: { text: 'hello world' } } });
  });

  it('counts into max_llm_tokens, fits into what is left, and says when that limit left content out', async () => {
    const limited = budgetOf({ maxLlmTokens: 13, llmTokens: 0 });
    expect((await contextOf({ max_tokens: 100 }, docs, ctxOf(limited))).token_count).toBe(13);
    expect(limited).toMatchObject({ llmTokens: 13, llmLimitReached: true });

    const own = budgetOf({ maxLlmTokens: 100, llmTokens: 0 });
    await contextOf({ max_tokens: 13 }, docs, ctxOf(own));
    expect(own.llmTokens).toBe(13);
    expect(own.llmLimitReached).toBeUndefined();

    const spent = budgetOf({ maxLlmTokens: 100, llmTokens: 95 });
    expect((await contextOf({ max_tokens: 100 }, docs, ctxOf(spent))).citations.map((c) => c.document_id)).toEqual(['a']);
    expect(spent).toMatchObject({ llmTokens: 100, llmLimitReached: true });

    const unlimited = budgetOf();
    await contextOf({}, docs, ctxOf(unlimited));
    expect(unlimited).toMatchObject({ llmTokens: 22 });
    expect(unlimited.llmLimitReached).toBeUndefined();
  });

  it('treats special-token text as text and bounds the work on pathological runs', async () => {
    const special = await contextOf({ max_tokens: 100 }, [doc('s', 'a <|endoftext|> b', 1)]);
    expect(special.context).toBe('[1] a <|endoftext|> b');
    expect(special.token_count).toBeGreaterThan(5);
    // One "word" of 300,000 letters: BPE on it whole would take minutes; it is read in bounded segments.
    const run = await contextOf({ max_tokens: 50 }, [doc('r', 'a'.repeat(300_000), 1), ...docs]);
    expect(run.token_count).toBeLessThanOrEqual(50);
    expect(run.citations.map((c) => c.document_id)).toEqual(['r']);
    const spaces = await contextOf({ max_tokens: 50, truncate: false }, [doc('w', ' '.repeat(300_000) + 'x', 1), ...docs]);
    expect(spaces.citations.map((c) => c.document_id)).toEqual(['a', 'b', 'c']);
  });

  it('cuts only pathological runs, so ordinary text is counted exactly', () => {
    expect(segments('ordinary text, with punctuation.\n\nAnd lines.')).toEqual(['ordinary text, with punctuation.\n\nAnd lines.']);
    expect(segments(`x ${'b'.repeat(450)} y`).map((s) => s.length)).toEqual([202, 200, 52]);
  });
});
