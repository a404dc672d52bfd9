/** lexical-reranker: the model contract, then the ranking it promises (phrases, proximity, weights, scripts). */
import { describe, expect, it } from 'vitest';
import model, { createLexicalRerankerModel, lexicalScore } from '../../../plugins/models/lexical-reranker/index.js';
import { runModelContract } from '../../support/model-contract.js';

runModelContract(model, {
  sampleInputs: [
    { query: 'solar panel efficiency', document: 'The efficiency of a solar panel drops as it heats up.' },
    { query: 'solar panel efficiency', document: '' },
    { query: '', document: 'Anything at all.' },
    { query: 'Ünïcödé ﬁle 東京', document: 'unicode file names from 東京 and ﬁle systems' },
    { query: 'retrieval', document: 'retrieval '.repeat(5000) },
    { query: 'bread oven', document: 'Glaciers carve valleys over thousands of years.' },
  ],
  create: createLexicalRerankerModel,
});

describe('lexical-reranker', () => {
  it('ranks a passage holding the query phrase above one with the same words scattered', () => {
    const query = 'machine learning model';
    const phrase = 'We trained a machine learning model on the archive and compared it with the old rules.';
    const scattered = 'The model of the machine was built for learning how the factory lines work together.';
    expect(lexicalScore(query, phrase)).toBeGreaterThan(lexicalScore(query, scattered));
    // And terms close together above the same terms far apart.
    const near = 'Harbour lighthouse keepers trim the lamp every evening near the rocks.';
    const far = `Harbour ${'filler words about other things '.repeat(10)} lighthouse.`;
    expect(lexicalScore('harbour lighthouse', near)).toBeGreaterThan(lexicalScore('harbour lighthouse', far));
  });

  it('scores nothing for no shared term, and more for more of the query', () => {
    expect(lexicalScore('quantum computing', 'Bread needs flour, water and salt.')).toBe(0);
    const one = lexicalScore('bread oven salt', 'Bread is baked daily.');
    const two = lexicalScore('bread oven salt', 'Bread is baked daily in an oven.');
    const three = lexicalScore('bread oven salt', 'Bread with salt is baked daily in an oven.');
    expect(one).toBeGreaterThan(0);
    expect(two).toBeGreaterThan(one);
    expect(three).toBeGreaterThan(two);
  });

  it('gives function words little weight, and prefers the shorter of two passages matching alike', () => {
    const content = lexicalScore('the glacier', 'A glacier moves slowly.');
    const functionOnly = lexicalScore('the glacier', 'The river moves slowly.');
    expect(content).toBeGreaterThan(functionOnly * 3);
    const short = lexicalScore('glacier', 'The glacier melts.');
    const long = lexicalScore('glacier', `The glacier melts. ${'Many other words follow here without the term. '.repeat(20)}`);
    expect(short).toBeGreaterThan(long);
  });

  it('matches across case, compatibility forms and scripts', () => {
    expect(lexicalScore('CAFÉ', 'un café noir')).toBe(lexicalScore('café', 'un café noir'));
    expect(lexicalScore('ﬁle', 'file')).toBeGreaterThan(0);
    expect(lexicalScore('東京', '東京 is big')).toBeGreaterThan(0);
  });

  it('refuses malformed pairs', async () => {
    await expect(model.infer([{ query: 'x' } as never])).rejects.toThrow(/query and a document/);
  });
});

describe('lexical-reranker bounds', () => {
  it('scores the most repetitive query and passage it accepts (work is bounded by term counts)', () => {
    const score = lexicalScore('a '.repeat(10_000), 'a '.repeat(100_000));
    expect(score).toBeGreaterThan(0);
    expect(Number.isFinite(score)).toBe(true);
  });
});
