/**
 * text_extractor: the extractor contract against a real in-process inference worker running the
 * hashed-ngram-text model, the chunking rules for every split_by, batching of embedding calls, reading
 * from the blob store, and the max_chars cap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readBlobBytes } from '../../../kernel/blobs/blob-store.js';
import { InputError } from '../../../kernel/errors.js';
import { InferenceClient, type CallOverrides } from '../../../kernel/inference/client.js';
import { defineModel, type ExtractorInput } from '../../../kernel/plugins.js';
import {
  characterSpans,
  chunkText,
  paragraphSpans,
  sentenceSpans,
  windows,
  wordSpans,
  type Chunk,
  type SplitBy,
} from '../../../plugins/extractors/text_extractor/chunking.js';
import textExtractor, { EMBED_BATCH } from '../../../plugins/extractors/text_extractor/index.js';
import { resolveParameters } from '../../../plugins/extractors/text_extractor/parameters.js';
import { createHashedNgramTextModel, hashedNgramEmbedding } from '../../../plugins/models/hashed-ngram-text/index.js';
import { runExtractorContract } from '../../support/extractor-contract.js';
import { collectDrafts as collect, startExtractorHarness, type ExtractorHarness } from '../../support/extractor-harness.js';


/** A client that records every embedText call (texts per call), so tests count calls instead of timing them. */
class CountingInferenceClient extends InferenceClient {
  readonly embedTextCalls: number[] = [];

  override async embedText(model: string, texts: readonly string[], overrides?: CallOverrides): Promise<number[][]> {
    this.embedTextCalls.push(texts.length);
    return super.embedText(model, texts, overrides);
  }
}

type Harness = ExtractorHarness<CountingInferenceClient> & {
  /** Batch sizes the model's infer() received inside the worker. */
  inferBatches: number[];
};

/** A real worker serving the real hashed-ngram-text model (wrapped to count its calls), a client, and a blob store in a temp dir. */
async function startHarness(): Promise<Harness> {
  const real = createHashedNgramTextModel();
  const inferBatches: number[] = [];
  const counted = defineModel<string, number[]>({
    name: real.name,
    task: real.task,
    dims: real.dims,
    load: () => real.load(),
    infer: (inputs) => {
      inferBatches.push(inputs.length);
      return real.infer(inputs);
    },
  });
  const harness = await startExtractorHarness({ name: 'text-extractor', models: [counted], client: (o) => new CountingInferenceClient(o) });
  return { ...harness, inferBatches };
}

function input(fields: Record<string, unknown>, parameters: Record<string, unknown> = {}, mimeType = 'text/plain'): ExtractorInput {
  return { objectId: 'obj_test', mimeType, fields, parameters };
}


const PROSE = [
  'Tessera is a multimodal retrieval service. It turns objects into searchable documents!',
  'Dr. Smith met Mr. J. R. Jones at 3.14 p.m. on Jan. 5, e.g. near the U.S. border. Was it raining? Nobody knows...',
  'Then they left. "Really?" she asked. The end',
].join(' ');

const ARTICLE = [
  '# A heading',
  '',
  PROSE,
  '',
  '   ',
  'Second paragraph, short.\nIt continues on a new line.',
  '',
  '',
  'Third paragraph: 東京は日本の首都です。猫がマットの上に座った。 Ünïcödé café, emoji 🦊👩‍💻 and combining é.',
].join('\n');

const CONTRACT_BLOB_KEY = 'org_test/ns_test/objects/obj_contract/content';

// ------------------------------------------------------------------------------------------------- contract

runExtractorContract(textExtractor, {
  inputs: [
    input({ text: 'Hello world. A short text gives one chunk.' }),
    input({ text: ARTICLE, title: 'other source fields are ignored' }, { split_by: 'sentences', chunk_size: 2, chunk_overlap: 1 }),
    input({ text: ARTICLE.repeat(3) }, { split_by: 'characters', chunk_size: 120, chunk_overlap: 20 }),
    input({ text: ARTICLE }, { split_by: 'paragraphs', chunk_size: 1, chunk_overlap: 0 }),
    input({ text: { storage_key: CONTRACT_BLOB_KEY, content_type: 'text/plain', size_bytes: Buffer.byteLength(ARTICLE) } }, { chunk_size: 12 }),
    input({ text: { kind: 'json', values: [1, 2, 3] } }, {}, 'application/json'),
  ],
  context: async () => {
    const harness = await startHarness();
    await harness.blobs.put(CONTRACT_BLOB_KEY, Buffer.from(ARTICLE, 'utf8'), { contentType: 'text/plain' });
    return { ctx: harness.ctx, cleanup: harness.cleanup };
  },
});

// ------------------------------------------------------------------------------------------------- chunking

/** The properties every chunking must have, whatever the unit. */
function expectWellFormed(text: string, chunks: readonly Chunk[]): void {
  for (const chunk of chunks) {
    expect(text.slice(chunk.start, chunk.end)).toBe(chunk.text);
    expect(chunk.text.trim().length).toBeGreaterThan(0);
    expect(chunk.text).toBe(chunk.text.trim());
  }
  for (let i = 1; i < chunks.length; i++) expect(chunks[i]!.start).toBeGreaterThan(chunks[i - 1]!.start);
}

function chunk(text: string, splitBy: SplitBy, size: number, overlap: number, minChars = 1): Chunk[] {
  return chunkText(text, { splitBy, size, overlap, minChars });
}

describe('text_extractor chunking', () => {
  it('windows: steps by size − overlap, ends exactly at the last unit, never a window of overlap only', () => {
    const units = Array.from({ length: 10 }, (_, i) => ({ start: i, end: i + 1 }));
    expect(windows(units, 4, 1)).toEqual([
      { first: 0, last: 3 },
      { first: 3, last: 6 },
      { first: 6, last: 9 },
    ]);
    expect(windows(units, 4, 0)).toEqual([
      { first: 0, last: 3 },
      { first: 4, last: 7 },
      { first: 8, last: 9 },
    ]);
    expect(windows(units, 20, 5)).toEqual([{ first: 0, last: 9 }]);
    expect(windows([], 3, 1)).toEqual([]);
    expect(() => windows(units, 3, 3)).toThrow(RangeError);
  });

  it('words: never cuts a word, counts overlap in words, offsets reproduce the chunks', () => {
    const text = '  alpha beta\tgamma\n\ndelta epsilon-zeta eta, theta iota kappa.  ';
    const chunks = chunk(text, 'words', 4, 1);
    expectWellFormed(text, chunks);
    expect(chunks.map((c) => c.text)).toEqual(['alpha beta\tgamma\n\ndelta', 'delta epsilon-zeta eta, theta', 'theta iota kappa.']);
    const words = wordSpans(text).map((s) => text.slice(s.start, s.end));
    for (const c of chunks) {
      // Every chunk starts and ends on a word boundary of the original text.
      expect(words.some((w) => c.text.startsWith(w))).toBe(true);
      expect(/\s/.test(text[c.start - 1] ?? ' ') && /\s/.test(text[c.end] ?? ' ')).toBe(true);
    }
    // Overlap: the last word of each chunk is the first word of the next.
    for (let i = 1; i < chunks.length; i++) {
      expect(chunks[i]!.text.split(/\s+/)[0]).toBe(chunks[i - 1]!.text.split(/\s+/).at(-1));
    }
  });

  it('words: text shorter than one chunk gives one chunk; empty and blank text give none', () => {
    expect(chunk('just three words', 'words', 200, 20)).toEqual([{ start: 0, end: 16, text: 'just three words', units: 3 }]);
    expect(chunk('', 'words', 10, 2)).toEqual([]);
    expect(chunk(' \n\t \n ', 'words', 10, 2)).toEqual([]);
  });

  it('words: splits scripts written without spaces into words, punctuation kept with its word', () => {
    const text = '東京は日本の首都です。猫がいる';
    const spans = wordSpans(text);
    expect(spans.length).toBeGreaterThan(3);
    // Contiguous and covering: nothing lost, the '。' rides with the word before it.
    expect(spans.map((s) => text.slice(s.start, s.end)).join('')).toBe(text);
    expect(spans.some((s) => text.slice(s.start, s.end).endsWith('。'))).toBe(true);
    expect(spans.every((s) => text.slice(s.start, s.end) !== '。')).toBe(true);
  });

  it('characters: exact windows with overlap, never splitting an emoji sequence or a combining mark', () => {
    const text = 'abcdefghij';
    const chunks = chunk(text, 'characters', 4, 2);
    expect(chunks.map((c) => c.text)).toEqual(['abcd', 'cdef', 'efgh', 'ghij']);
    expectWellFormed(text, chunks);

    const unicode = 'e\u0301🦊👩‍💻x🇫\u00e9\r\nZ';
    const units = characterSpans(unicode).map((s) => unicode.slice(s.start, s.end));
    expect(units.join('')).toBe(unicode);
    expect(units).toContain('e\u0301');
    expect(units).toContain('👩‍💻');
    expect(units).toContain('\r\n');
    for (const c of chunk(unicode, 'characters', 2, 1)) {
      expect(unicode.slice(c.start, c.end)).toBe(c.text);
      // No lone surrogate at either end.
      expect(c.text).toBe(Buffer.from(c.text, 'utf8').toString('utf8'));
    }
  });

  it('characters: whitespace-only windows are dropped, and min_chunk_chars drops short ones', () => {
    const text = 'abc          def';
    // 'abc ', '    ', '    ', ' def': the two blank windows go.
    expect(chunk(text, 'characters', 4, 0).map((c) => c.text)).toEqual(['abc ', ' def']);
    expect(chunk(text, 'characters', 4, 0, 3).map((c) => c.text)).toEqual(['abc ', ' def']);
    expect(chunk(text, 'characters', 4, 0, 4).map((c) => c.text)).toEqual([]);
  });

  it('sentences: . ! ? and ellipses end sentences; abbreviations, initials, decimals and lower-case continuations do not', () => {
    const sentences = sentenceSpans(PROSE).map((s) => PROSE.slice(s.start, s.end));
    expect(sentences).toEqual([
      'Tessera is a multimodal retrieval service.',
      'It turns objects into searchable documents!',
      'Dr. Smith met Mr. J. R. Jones at 3.14 p.m. on Jan. 5, e.g. near the U.S. border.',
      'Was it raining?',
      'Nobody knows...',
      'Then they left.',
      '"Really?" she asked.',
      'The end',
    ]);
    const more = 'Wait… What?! Yes. 東京です。猫です。\n\nHeading without stop\n\nLast one.';
    expect(sentenceSpans(more).map((s) => more.slice(s.start, s.end))).toEqual([
      'Wait…',
      'What?!',
      'Yes.',
      '東京です。',
      '猫です。',
      'Heading without stop',
      'Last one.',
    ]);
  });

  it('sentences: overlap counted in sentences', () => {
    const chunks = chunk(PROSE, 'sentences', 3, 1);
    expectWellFormed(PROSE, chunks);
    expect(chunks.map((c) => c.units)).toEqual([3, 3, 3, 2]);
    expect(chunks[0]!.text.endsWith('near the U.S. border.')).toBe(true);
    expect(chunks[1]!.text.startsWith('Dr. Smith')).toBe(true);
    expect(chunks[3]!.text).toBe('"Really?" she asked. The end');
  });

  it('paragraphs: split on blank lines (also whitespace-only and CRLF ones), a single newline stays inside', () => {
    const paragraphs = paragraphSpans(ARTICLE).map((s) => ARTICLE.slice(s.start, s.end));
    expect(paragraphs).toHaveLength(4);
    expect(paragraphs[0]).toBe('# A heading');
    expect(paragraphs[2]).toBe('Second paragraph, short.\nIt continues on a new line.');
    const crlf = 'one\r\n\r\ntwo\r\nstill two\r\n \r\n\r\nthree';
    expect(paragraphSpans(crlf).map((s) => crlf.slice(s.start, s.end))).toEqual(['one', 'two\r\nstill two', 'three']);
    const chunks = chunk(ARTICLE, 'paragraphs', 2, 1);
    expectWellFormed(ARTICLE, chunks);
    expect(chunks.map((c) => c.units)).toEqual([2, 2, 2]);
    expect(chunks[1]!.text.startsWith(PROSE)).toBe(true);
  });

  it('every split_by, with and without overlap, on unicode text: offsets reproduce chunks, no empty chunks, units covered', () => {
    const text = ARTICLE.repeat(4);
    for (const splitBy of ['characters', 'words', 'sentences', 'paragraphs'] as const) {
      for (const [size, overlap] of [
        [1, 0],
        [3, 1],
        [7, 3],
        [50, 0],
      ] as const) {
        const chunks = chunk(text, splitBy, size, overlap);
        if (splitBy !== 'characters') expectWellFormed(text, chunks);
        for (const c of chunks) expect(text.slice(c.start, c.end)).toBe(c.text);
        expect(chunks.every((c) => c.units <= size)).toBe(true);
        // With overlap, consecutive chunks share text, unless a whitespace-only window between them was dropped.
        for (let i = 1; i < chunks.length; i++) {
          const [prev, next] = [chunks[i - 1]!, chunks[i]!];
          if (overlap === 0) expect(next.start).toBeGreaterThanOrEqual(prev.end);
          else expect(next.start < prev.end || text.slice(prev.end, next.start).trim() === '', `${splitBy} ${size}/${overlap} #${i}`).toBe(true);
        }
      }
    }
  });

  it('parameters: defaults per split_by, overlap a tenth of the size, overlap ≥ size refused', () => {
    expect(resolveParameters({})).toEqual({
      splitBy: 'words',
      chunkSize: 200,
      chunkOverlap: 20,
      model: 'hashed-ngram-text',
      maxChars: 2_000_000,
      minChunkChars: 1,
    });
    expect(resolveParameters({ split_by: 'characters' })).toMatchObject({ chunkSize: 1000, chunkOverlap: 100 });
    expect(resolveParameters({ split_by: 'sentences' })).toMatchObject({ chunkSize: 5, chunkOverlap: 0 });
    expect(resolveParameters({ split_by: 'paragraphs' })).toMatchObject({ chunkSize: 3, chunkOverlap: 0 });
    expect(resolveParameters({ chunk_size: 35 })).toMatchObject({ chunkSize: 35, chunkOverlap: 3 });
    expect(() => resolveParameters({ chunk_size: 5, chunk_overlap: 5 })).toThrow(InputError);
    expect(() => resolveParameters({ split_by: 'lines' })).toThrow(InputError);
    expect(() => resolveParameters({ chunk_size: 0 })).toThrow(InputError);
  });
});

// ------------------------------------------------------------------------------------------------- extractor

describe('text_extractor with an inference worker and a blob store', () => {
  let harness: Harness;

  beforeAll(async () => {
    harness = await startHarness();
  });

  afterAll(async () => {
    await harness?.cleanup();
  });

  it('writes one document per chunk with offsets, counts and the hashed-ngram embedding', async () => {
    const text = 'one two three four five six seven eight nine ten eleven';
    const drafts = await collect(textExtractor.extract(harness.ctx, input({ text }, { chunk_size: 4, chunk_overlap: 1 })));
    expect(drafts.map((d) => d.key)).toEqual(['chunk:0', 'chunk:1', 'chunk:2', 'chunk:3']);
    expect(drafts.map((d) => d.fields.text)).toEqual([
      'one two three four',
      'four five six seven',
      'seven eight nine ten',
      'ten eleven',
    ]);
    for (const [i, draft] of drafts.entries()) {
      expect(draft.fields).toMatchObject({ chunk_index: i, chunk_count: 4, truncated: false });
      expect(text.slice(draft.fields.char_start as number, draft.fields.char_end as number)).toBe(draft.fields.text);
      expect(draft.fields.word_count).toBe((draft.fields.text as string).split(' ').length);
      // The vector is the model's, computed in the worker.
      const expected = hashedNgramEmbedding(draft.fields.text as string);
      draft.features!.text_embedding!.forEach((x, j) => expect(x).toBeCloseTo(expected[j]!, 6));
    }
  });

  it('embeds a long text in a few batched calls, not one per chunk', async () => {
    const words = Array.from({ length: 3000 }, (_, i) => `word${i}`);
    const chunkSize = 10;
    const expectedChunks = words.length / chunkSize;
    const callsBefore = harness.client.embedTextCalls.length;
    const inferBefore = harness.inferBatches.length;
    const drafts = await collect(
      textExtractor.extract(harness.ctx, input({ text: words.join(' ') }, { chunk_size: chunkSize, chunk_overlap: 0 })),
    );
    expect(drafts).toHaveLength(expectedChunks);
    const calls = harness.client.embedTextCalls.slice(callsBefore);
    expect(calls).toHaveLength(Math.ceil(expectedChunks / EMBED_BATCH));
    expect(calls.reduce((a, b) => a + b, 0)).toBe(expectedChunks);
    const inferCalls = harness.inferBatches.slice(inferBefore);
    expect(inferCalls.length).toBeLessThanOrEqual(Math.ceil(expectedChunks / EMBED_BATCH));
    expect(inferCalls.reduce((a, b) => a + b, 0)).toBe(expectedChunks);
  });

  it('reads the text from a blob reference (UTF-8, BOM dropped)', async () => {
    const key = 'org_test/ns_test/objects/obj_blob/content';
    const text = 'Grüße aus Köln. 東京は日本の首都です。 Emoji 🦊 too.';
    await harness.blobs.put(key, Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text, 'utf8')]), { contentType: 'text/plain' });
    const ref = { storage_key: key, content_type: 'text/plain', size_bytes: Buffer.byteLength(text) + 3 };
    const drafts = await collect(textExtractor.extract(harness.ctx, input({ text: ref }, { split_by: 'sentences', chunk_size: 1, chunk_overlap: 0 })));
    expect(drafts.map((d) => d.fields.text)).toEqual(['Grüße aus Köln.', '東京は日本の首都です。', 'Emoji 🦊 too.']);
    for (const d of drafts) expect(text.slice(d.fields.char_start as number, d.fields.char_end as number)).toBe(d.fields.text);

    await harness.blobs.put('org_test/ns_test/objects/obj_empty/content', Buffer.alloc(0));
    expect(await collect(textExtractor.extract(harness.ctx, input({ text: { storage_key: 'org_test/ns_test/objects/obj_empty/content' } })))).toEqual([]);
  });

  it('enforces max_chars on inline text and on blobs, reading only a bounded range of a large blob', async () => {
    const text = 'abcdefghij '.repeat(1000); // 11,000 characters
    const maxChars = 1000;
    const params = { split_by: 'characters', chunk_size: 300, chunk_overlap: 0, max_chars: maxChars };
    const inline = await collect(textExtractor.extract(harness.ctx, input({ text }, params)));
    expect(Math.max(...inline.map((d) => d.fields.char_end as number))).toBeLessThanOrEqual(maxChars);
    expect(inline.map((d) => d.fields.text).join('')).toBe(text.slice(0, maxChars));
    expect(inline.every((d) => d.fields.truncated === true)).toBe(true);

    const key = 'org_test/ns_test/objects/obj_large/content';
    // Multi-byte characters at the cut: the ranged read must not leave a broken sequence behind.
    const large = '€😀ab'.repeat(5000);
    await harness.blobs.put(key, Buffer.from(large, 'utf8'), { contentType: 'text/plain' });
    const fromBlob = await collect(textExtractor.extract(harness.ctx, input({ text: { storage_key: key } }, params)));
    const joined = fromBlob.map((d) => d.fields.text).join('');
    expect(joined.length).toBeLessThanOrEqual(maxChars);
    expect(large.startsWith(joined)).toBe(true);
    expect(joined.length).toBeGreaterThan(maxChars - 2);
    expect(fromBlob.every((d) => d.fields.truncated === true)).toBe(true);

    const short = await collect(textExtractor.extract(harness.ctx, input({ text: 'short' }, { max_chars: maxChars })));
    expect(short.map((d) => d.fields.truncated)).toEqual([false]);
  });

  it('reads a blob a store holds in memory from its bytes, as it would from its stream', async () => {
    const key = 'org_test/ns_test/objects/obj_in_memory/content';
    const text = `${'\ufeff'}Grüße aus Köln. ${'€😀ab'.repeat(2000)}`;
    await harness.blobs.put(key, Buffer.from(text, 'utf8'), { contentType: 'text/plain' });
    // A store that already holds the bytes (as a batch chunk's prefetched blobs are served): its stream must not be needed.
    const inMemory = new Proxy(harness.blobs, {
      get: (target, property, receiver) => {
        if (property !== 'get') return Reflect.get(target, property, receiver);
        return async (k: string, range?: { start: number; end?: number }) => {
          const read = await target.get(k, range);
          const bytes = await readBlobBytes(read);
          return { info: read.info, bytes, get body(): never { throw new Error('the stream was read') } };
        };
      },
    });
    for (const params of [{ split_by: 'sentences', chunk_size: 1, chunk_overlap: 0 }, { split_by: 'characters', chunk_size: 300, chunk_overlap: 0, max_chars: 1000 }]) {
      const streamed = await collect(textExtractor.extract(harness.ctx, input({ text: { storage_key: key } }, params)));
      const fromBytes = await collect(textExtractor.extract({ ...harness.ctx, blobs: inMemory }, input({ text: { storage_key: key } }, params)));
      expect(fromBytes.map((d) => d.fields)).toEqual(streamed.map((d) => d.fields));
      expect(fromBytes.length).toBeGreaterThan(1);
    }
  });

  it('refuses bad input with typed errors', async () => {
    await expect(collect(textExtractor.extract(harness.ctx, input({})))).rejects.toBeInstanceOf(InputError);
    await expect(collect(textExtractor.extract(harness.ctx, input({ text: 'x' }, { chunk_size: 3, chunk_overlap: 3 })))).rejects.toBeInstanceOf(InputError);
    await expect(collect(textExtractor.extract(harness.ctx, input({ text: 'x' }, { split_by: 'pages' })))).rejects.toBeInstanceOf(InputError);
  });
});
