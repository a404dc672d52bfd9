/**
 * A tiny BERT-shaped text model and its WordPiece tokenizer, both written by hand.
 *
 * Graph: input_ids, token_type_ids, attention_mask [batch, seq] int64 →
 *   last_hidden_state [batch, seq, 8] = word_embeddings[input_ids] + type_embeddings[token_type_ids]
 *                                        + (1 − attention_mask) · 7
 * Pooling (masked mean) is the plugin's job. The table is made so that meaning is visible: each topic
 * (animals, money, weather) owns one axis, words of a topic differ by a small personal component,
 * function words and special tokens are short vectors off those axes. [PAD] is huge, and masked
 * positions get +7 from the graph, so any padding that leaks into pooling moves a vector a lot.
 */

export const TEXT_DIMS = 8;

export const SPECIAL_TOKENS = ['[PAD]', '[UNK]', '[CLS]', '[SEP]'] as const;

const TOPICS = {
  animal: ['cat', 'dog', 'kitten', 'puppy', 'pet', 'animal', 'fur', 'bird'],
  money: ['bank', 'money', 'loan', 'market', 'stock', 'price', 'pay'],
  weather: ['rain', 'sun', 'cloud', 'storm', 'weather', 'snow', 'wind'],
} as const;
const FUNCTION_WORDS = ['the', 'a', 'is', 'on', 'and', 'in', 'of', 'my'] as const;
const SUBWORDS = ['##s', '##ing', '##y'] as const;

const TOPIC_AXIS: Record<keyof typeof TOPICS, number> = { animal: 0, money: 1, weather: 2 };

function row(values: Partial<Record<number, number>>): number[] {
  return Array.from({ length: TEXT_DIMS }, (_, i) => values[i] ?? 0);
}

/** Token → [id, embedding row]; ids follow insertion order (specials first, as in BERT vocabularies). */
function buildTable(): Map<string, number[]> {
  const table = new Map<string, number[]>();
  table.set('[PAD]', row(Object.fromEntries(Array.from({ length: TEXT_DIMS }, (_, i) => [i, 9]))));
  table.set('[UNK]', row({ 6: 0.3, 7: 0.3 }));
  table.set('[CLS]', row({ 7: 0.5 }));
  table.set('[SEP]', row({ 6: 0.5 }));
  for (const [topic, words] of Object.entries(TOPICS) as Array<[keyof typeof TOPICS, readonly string[]]>) {
    words.forEach((word, k) => {
      // A personal component on axes 3..5 keeps words of one topic apart without leaving the topic.
      table.set(word, row({ [TOPIC_AXIS[topic]]: 1, [3 + (k % 3)]: 0.15 + 0.05 * k }));
    });
  }
  FUNCTION_WORDS.forEach((word, k) => table.set(word, row({ 6: 0.2, 7: 0.05 * (k + 1) })));
  SUBWORDS.forEach((piece, k) => table.set(piece, row({ 5: 0.1 + 0.05 * k })));
  return table;
}

const TABLE = buildTable();

/** token → id */
export const TEXT_VOCAB: ReadonlyMap<string, number> = new Map([...TABLE.keys()].map((token, id) => [token, id]));
/** id → embedding row */
export const TEXT_EMBEDDINGS: readonly (readonly number[])[] = [...TABLE.values()];

/** Row 0 for segment A (what single texts use), row 1 nonzero, so a wrong token_type_ids shows. */
export const TYPE_EMBEDDINGS: readonly (readonly number[])[] = [row({}), row({ 0: 3, 1: -3, 2: 3 })];

/** What the masked mean pooling of the plugin must give for these tokens (before L2 normalisation). */
export function expectedTextVector(tokens: readonly string[]): number[] {
  const sum = new Array<number>(TEXT_DIMS).fill(0);
  for (const token of tokens) {
    const id = TEXT_VOCAB.get(token);
    if (id === undefined) throw new Error(`token '${token}' is not in the tiny vocabulary`);
    TEXT_EMBEDDINGS[id]!.forEach((v, i) => (sum[i]! += v));
  }
  const mean = sum.map((v) => v / tokens.length);
  const norm = Math.hypot(...mean);
  return mean.map((v) => v / norm);
}

/** A tokenizer.json in the Hugging Face format: BERT normaliser and pre-tokeniser, WordPiece, [CLS] … [SEP]. */
export function tinyTokenizerJson(): Record<string, unknown> {
  const special = (token: string) => ({ SpecialToken: { id: token, type_id: 0 } });
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((content) => ({
      id: TEXT_VOCAB.get(content),
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: 'BertPreTokenizer' },
    post_processor: {
      type: 'TemplateProcessing',
      single: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]')],
      pair: [special('[CLS]'), { Sequence: { id: 'A', type_id: 0 } }, special('[SEP]'), { Sequence: { id: 'B', type_id: 1 } }, { SpecialToken: { id: '[SEP]', type_id: 1 } }],
      special_tokens: Object.fromEntries(
        ['[CLS]', '[SEP]'].map((token) => [token, { id: token, ids: [TEXT_VOCAB.get(token)], tokens: [token] }]),
      ),
    },
    decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
    model: {
      type: 'WordPiece',
      unk_token: '[UNK]',
      continuing_subword_prefix: '##',
      max_input_chars_per_word: 100,
      vocab: Object.fromEntries(TEXT_VOCAB),
    },
  };
}

/** tokenizer_config.json as Hugging Face repositories ship it (only the fields that matter here). */
export function tinyTokenizerConfig(modelMaxLength: number): Record<string, unknown> {
  return {
    do_lower_case: true,
    model_max_length: modelMaxLength,
    pad_token: '[PAD]',
    unk_token: '[UNK]',
    cls_token: '[CLS]',
    sep_token: '[SEP]',
    tokenizer_class: 'BertTokenizer',
  };
}
