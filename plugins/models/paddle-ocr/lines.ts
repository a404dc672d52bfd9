/** Turns the pipeline's lines into the `ocr` task's output: text one line per line, axis-aligned boxes. */
import type { OcrBox } from '../../../kernel/inference/model-io.js';
import type { RawLine } from './engine.js';

export interface OcrResult {
  /** Recognised lines, top to bottom, joined with '\n' ('' when the image holds no text). */
  text: string;
  boxes: OcrBox[];
}

/** Confidence is rounded so results compare equal across runs and platforms despite float noise. */
function round4(x: number): number {
  return Math.round(x * 10_000) / 10_000;
}

function clamp(x: number, min: number, max: number): number {
  return x < min ? min : x > max ? max : x;
}

/**
 * `scale` maps prepared-image pixels back to the source image (`width` × `height`); boxes are clamped to it
 * and rounded to whole pixels.
 */
export function toOcrResult(lines: readonly RawLine[], scale: number, width: number, height: number): OcrResult {
  const boxes: OcrBox[] = [];
  for (const line of lines) {
    const text = line.text.replace(/\s+/gu, ' ').trim();
    if (text.length === 0) continue;
    const points = (line.box ?? []).filter((p) => p.length >= 2 && Number.isFinite(p[0]) && Number.isFinite(p[1]));
    let x = 0;
    let y = 0;
    let w = 0;
    let h = 0;
    if (points.length > 0) {
      const xs = points.map((p) => clamp(p[0]! * scale, 0, width));
      const ys = points.map((p) => clamp(p[1]! * scale, 0, height));
      x = Math.round(Math.min(...xs));
      y = Math.round(Math.min(...ys));
      w = Math.round(Math.max(...xs)) - x;
      h = Math.round(Math.max(...ys)) - y;
    }
    boxes.push({ text, confidence: round4(clamp(line.mean, 0, 1)), x, y, width: w, height: h });
  }
  return { text: boxes.map((b) => b.text).join('\n'), boxes };
}
