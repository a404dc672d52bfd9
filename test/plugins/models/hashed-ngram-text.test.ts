/** hashed-ngram-text: the contract, then the lexical behaviour it promises (shared words, typos, scripts). */
import { describe, expect, it } from 'vitest';
import model, {
  HASHED_NGRAM_DIMS,
  createHashedNgramEmbedder,
  createHashedNgramTextModel,
  hashedNgramEmbedding,
  normaliseText,
} from '../../../plugins/models/hashed-ngram-text/index.js';
import { runModelContract } from '../../support/model-contract.js';

runModelContract(model, {
  sampleInputs: [
    'The quick brown fox jumps over the lazy dog',
    '',
    'a',
    'Ünïcödé — ﬁle names, emoji 🦊 and CJK 東京',
    'retrieval '.repeat(500),
  ],
  expectDims: HASHED_NGRAM_DIMS,
  create: createHashedNgramTextModel,
});

const cos = (a: readonly number[], b: readonly number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const sim = (a: string, b: string): number => cos(hashedNgramEmbedding(a), hashedNgramEmbedding(b));

describe('hashed-ngram-text', () => {
  it('puts texts that share words closer than unrelated texts', () => {
    const a = 'The cat sat on the mat';
    expect(sim(a, 'A cat was sitting on the mat')).toBeGreaterThan(sim(a, 'Quarterly revenue grew by ten percent') + 0.2);
    const q = 'how to reset a forgotten password';
    const near = 'reset your password if you forgot it';
    const far = 'best hiking trails near the alps';
    expect(sim(q, near)).toBeGreaterThan(sim(q, far));
  });

  it('keeps misspellings close through character n-grams', () => {
    const a = 'multimodal retrieval service';
    const typo = 'multimodl retreival servcie';
    const unrelated = 'the weather in paris is sunny';
    expect(sim(a, typo)).toBeGreaterThan(sim(a, unrelated) + 0.1);
    expect(sim('photograph', 'fotograph')).toBeGreaterThan(sim('photograph', 'telescope'));
  });

  it('normalises case, width and compatibility characters (NFKC) and ignores punctuation', () => {
    expect(hashedNgramEmbedding('ＴＥＳＴ ﬁle')).toEqual(hashedNgramEmbedding('test file'));
    expect(hashedNgramEmbedding('Hello, World!')).toEqual(hashedNgramEmbedding('hello world'));
    expect(normaliseText('  Hello,\tWORLD!! ')).toBe(' hello world ');
  });

  it('works for scripts written without spaces', () => {
    const a = '東京は日本の首都です';
    expect(sim(a, '日本の首都は東京です')).toBeGreaterThan(sim(a, '猫がマットの上に座った'));
    expect(sim('Привет, как дела?', 'привет как дела у тебя')).toBeGreaterThan(sim('Привет, как дела?', 'погода сегодня хорошая'));
  });

  it('maps empty and punctuation-only text to one fixed unit vector', () => {
    const empty = hashedNgramEmbedding('');
    expect(empty).toHaveLength(HASHED_NGRAM_DIMS);
    expect(cos(empty, empty)).toBeCloseTo(1, 12);
    expect(hashedNgramEmbedding('   ')).toEqual(empty);
    expect(hashedNgramEmbedding('?!…')).toEqual(empty);
    expect(Math.abs(cos(empty, hashedNgramEmbedding('hello world')))).toBeLessThan(0.2);
  });

  it('the plain function and the model give the same vectors', async () => {
    const texts = ['one', 'two words', 'three little words'];
    expect(await model.infer(texts)).toEqual(texts.map((t) => hashedNgramEmbedding(t)));
  });

  it('an embedder can be built with other dims and stays unit-length', () => {
    const embed = createHashedNgramEmbedder({ dims: 64 });
    const v = embed('some text');
    expect(v).toHaveLength(64);
    expect(Math.sqrt(cos(v, v))).toBeCloseTo(1, 12);
    expect(() => createHashedNgramEmbedder({ dims: 1 })).toThrow(RangeError);
  });

  it('handles long texts (the scratch tables grow) without changing short-text results', () => {
    const short = hashedNgramEmbedding('short text');
    const embed = createHashedNgramEmbedder();
    const long = Array.from({ length: 5000 }, (_, i) => `word${i}`).join(' ');
    const v = embed(long);
    expect(Math.sqrt(cos(v, v))).toBeCloseTo(1, 12);
    expect(embed('short text')).toEqual(short);
  });

  it('rejects inputs that are not strings', async () => {
    await expect(model.infer([42 as unknown as string])).rejects.toThrow(/input 0 is not a string/);
  });
});
