/**
 * score_normalize: rescales the scores of the documents it receives so that scores from different searches
 * or stages become comparable. Every method keeps the order (each is increasing in the score). Documents
 * without a finite score pass through unchanged and do not take part. Degenerate inputs never produce NaN:
 * constant scores become 1 (min_max), 0 (z_score) or 1/n (softmax); all-zero scores stay 0 (l2).
 */
import { defineStage, type StageDocument } from '../../../kernel/plugins.js';

export type NormalizeMethod = 'min_max' | 'z_score' | 'softmax' | 'l2';

export interface ScoreNormalizeParameters {
  method?: NormalizeMethod;
  /** softmax only: exp(score / temperature); lower is sharper. */
  temperature?: number;
}

// Loops rather than Math.max(...scores): spreading a very long list overflows the call stack.
const maxOf = (scores: readonly number[]) => scores.reduce((m, s) => (s > m ? s : m), -Infinity);
const minOf = (scores: readonly number[]) => scores.reduce((m, s) => (s < m ? s : m), Infinity);

/** The normalized scores, in the order given. */
export function normalizeScores(scores: readonly number[], method: NormalizeMethod, temperature = 1): number[] {
  if (scores.length === 0) return [];
  switch (method) {
    case 'min_max': {
      const min = minOf(scores);
      const range = maxOf(scores) - min;
      return scores.map((s) => (range > 0 ? (s - min) / range : 1));
    }
    case 'z_score': {
      const mean = scores.reduce((sum, s) => sum + s, 0) / scores.length;
      const std = Math.sqrt(scores.reduce((sum, s) => sum + (s - mean) ** 2, 0) / scores.length);
      return scores.map((s) => (std > 0 ? (s - mean) / std : 0));
    }
    case 'softmax': {
      // Shifting by the maximum keeps exp() finite for any scores; the result is the same.
      const max = maxOf(scores);
      const exps = scores.map((s) => Math.exp((s - max) / temperature));
      const total = exps.reduce((sum, e) => sum + e, 0);
      return exps.map((e) => e / total);
    }
    case 'l2': {
      // Scaled by the largest magnitude first, so squaring huge scores cannot overflow to Infinity.
      const scale = maxOf(scores.map(Math.abs));
      if (!(scale > 0)) return scores.map(() => 0);
      const norm = Math.sqrt(scores.reduce((sum, s) => sum + (s / scale) ** 2, 0));
      return scores.map((s) => s / scale / norm);
    }
  }
}

export default defineStage<ScoreNormalizeParameters>({
  id: 'score_normalize',
  version: '1.0',
  type: 'apply',
  description:
    'Rescales scores: `min_max` to [0, 1], `z_score` to mean 0 and standard deviation 1, `softmax` (with `temperature`) to probabilities summing to 1, `l2` to a unit vector. Order is kept; documents without a score are left as they are; constant scores give 1, 0, 1/n and 0 respectively.',
  parameters: {
    type: 'object',
    additionalProperties: false,
    properties: {
      method: { enum: ['min_max', 'z_score', 'softmax', 'l2'], default: 'min_max' },
      temperature: { type: 'number', exclusiveMinimum: 0, maximum: 1000, default: 1 },
    },
  },
  async run(_ctx, docs, params) {
    const positions: number[] = [];
    docs.forEach((doc, i) => {
      if (typeof doc.score === 'number' && Number.isFinite(doc.score)) positions.push(i);
    });
    const normalized = normalizeScores(positions.map((i) => docs[i]!.score!), params.method ?? 'min_max', params.temperature ?? 1);
    const out: StageDocument[] = [...docs];
    positions.forEach((docIndex, k) => {
      out[docIndex] = { ...docs[docIndex]!, score: normalized[k]! };
    });
    return out;
  },
});
