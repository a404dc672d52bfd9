import { Tiktoken } from 'js-tiktoken/lite';
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

  // js-tiktoken's own encoder is the reference: this one must give its tokens for any text without long runs.
  const references = new Map<string, Tiktoken>();
  const reference = async (name: 'o200k_base' | 'cl100k_base') => {
    const ranks = name === 'o200k_base' ? (await import('js-tiktoken/ranks/o200k_base')).default : (await import('js-tiktoken/ranks/cl100k_base')).default;
    if (!references.has(name)) references.set(name, new Tiktoken(ranks));
    return references.get(name)!;
  };
  const ordinary = [
    'hello world',
    'The quick brown fox jumps over the lazy dog. It\'s 3:45pm; they\'ll arrive at 12,345.67 USD!',
    "  leading spaces\n\n\ttabs\r\nand CRLF   \n",
    'function f(x: number): string { return `${x}`; } // code => [1, 2, 3]',
    'Ünïcödé naïve café résumé — “quotes” … ½ ﬁ',
    '日本語のテキストと中文文本，한국어 텍스트。',
    'Emoji 😀👍🏽👨‍👩‍👧 and flags 🇫🇷🇯🇵, combining e\u0301 and zero\u200dwidth',
    'SHOUTING WORDS and MixedCase iPhone JSONParser HTTPServer',
    'unusualconcatenatedwordsthatneedmanymerges antidisestablishmentarianism',
    "don't WON'T we've I'M you'd",
    'a <|endoftext|> b <|endofprompt|>',
    '\u00a0non\u2028breaking\u3000spaces',
  ];

  it('gives the tokens of js-tiktoken for ordinary text, in both encodings', async () => {
    for (const name of ['o200k_base', 'cl100k_base'] as const) {
      const [counter, tiktoken] = await Promise.all([tokenCounter(name), reference(name)]);
      for (const text of ordinary) {
        const expected = tiktoken.encode(text, [], []);
        expect(counter.encode(text), `${name}: ${text}`).toEqual(expected);
        expect(counter.count(text)).toBe(expected.length);
      }
      const all = ordinary.join('\n');
      expect(counter.encode(all)).toEqual(tiktoken.encode(all, [], []));
    }
  });

  it('counts 200,000 letters and 20,000 emoji correctly, as runs cut every 200 characters', async () => {
    const counter = await tokenCounter('o200k_base');
    const tiktoken = await reference('o200k_base');
    // A run of 200,000 letters is 1,000 segments of 200; 20,000 emoji (40,000 code units) are 200 of 100 emoji.
    expect(counter.count('a'.repeat(200_000))).toBe(1000 * tiktoken.encode('a'.repeat(200), [], []).length);
    expect(counter.count('a'.repeat(200_000))).toBe(25_000);
    const hundred = tiktoken.encode('😀'.repeat(100), [], []);
    expect(counter.encode('😀'.repeat(20_000))).toEqual(Array.from({ length: 200 }, () => hundred).flat());
    expect(counter.count('😀'.repeat(20_000))).toBe(20_000);

    // Through the stage the whole text fits a large budget (the counts are those the stage gave before).
    // Contexts are compared as booleans: a failing diff of 200,000 characters is unreadable.
    const letters = await contextOf({ max_tokens: 1_000_000 }, [doc('a', 'a'.repeat(200_000), 1)]);
    expect(letters.context === `[1] ${'a'.repeat(200_000)}`).toBe(true);
    expect(letters).toMatchObject({ token_count: 25_005, truncated: false });
    const emoji = await contextOf({ max_tokens: 1_000_000 }, [doc('e', '😀'.repeat(20_000), 1)]);
    expect(emoji.context === `[1] ${'😀'.repeat(20_000)}`).toBe(true);
    expect(emoji).toMatchObject({ token_count: 20_003, truncated: false });
    // Cut to a small budget: whole emoji only, "[1] " taking 3 tokens.
    const cut = await contextOf({ max_tokens: 1000 }, [doc('e', '😀'.repeat(20_000), 1)]);
    expect(cut).toMatchObject({ context: `[1] ${'😀'.repeat(997)}`, token_count: 1000, truncated: true });
  });

  it('never cuts a run inside a surrogate pair', async () => {
    const loneSurrogate = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
    const text = `x${'😀'.repeat(300)}`; // the emoji start at odd offsets: a cut every 200 would split one
    const parts = segments(text);
    expect(parts.join('')).toBe(text);
    expect(parts.length).toBeGreaterThan(1);
    for (const part of parts) expect(part).not.toMatch(loneSurrogate);
    const counter = await tokenCounter('o200k_base');
    const tiktoken = await reference('o200k_base');
    expect(counter.encode(text)).toEqual(parts.flatMap((part) => tiktoken.encode(part, [], [])));
    const head = counter.head(text, 150);
    expect(head.text).not.toMatch(loneSurrogate);
    expect(head.tokens).toBeLessThanOrEqual(150);
    expect(counter.count(head.text)).toBe(head.tokens);
  });

  it('reads only as much text as the budget needs, and lets other work run while counting', async () => {
    const counter = await tokenCounter('o200k_base');
    const english = 'It was the best of times, it was the worst of times. '.repeat(20_000); // ~1 MB
    // With a limit it stops at the first piece past it: a few tokens, not the ~250,000 of the whole text.
    expect(counter.encode(english, 10).length).toBe(11);
    expect(counter.encode('a'.repeat(200_000), 10).length).toBeLessThanOrEqual(10 + 25);
    expect(counter.head(english, 12)).toEqual({ text: 'It was the best of times, it was the worst of', tokens: 12, whole: false });
    // The async forms pause every few thousand characters, with the same results.
    let pauses = 0;
    const pause = () => {
      pauses++;
    };
    expect(await counter.countAsync(english, pause)).toBe(counter.count(english));
    expect(pauses).toBeGreaterThan(english.length / 10_000);
    expect(await counter.headAsync(english, 1000, pause)).toEqual(counter.head(english, 1000));
  });

  it('encodes in bounded chunks a piece the pattern would take whole', async () => {
    // o200k's pattern matches punctuation followed by any number of "\n/" as one piece.
    const counter = await tokenCounter('o200k_base');
    const tiktoken = await reference('o200k_base');
    const short = `!${'\n/'.repeat(100)}`; // within bounds: exactly js-tiktoken's tokens
    expect(counter.encode(short)).toEqual(tiktoken.encode(short, [], []));
    const long = `!${'\n/'.repeat(100_000)}`;
    const tokens = counter.count(long);
    expect(tokens).toBeGreaterThan(long.length / 200);
    expect(counter.head(long, 1_000_000)).toEqual({ text: long, tokens, whole: true });
  });
});
