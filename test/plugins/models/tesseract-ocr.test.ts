/**
 * tesseract-ocr (optional OCR model over Debian's `tesseract`, installed by .ci/run): the model contract,
 * reading text the test draws, lines top to bottom with boxes, and a clear error when the program is missing.
 */
import { describe, expect, it } from 'vitest';
import { ServiceUnavailableError } from '../../../kernel/errors.js';
import model, { createTesseractOcrModel, linesFromTsv } from '../../../plugins/models/tesseract-ocr/index.js';
import { solidImage, squash, textImage, textPng } from '../../support/media/images.js';
import { runModelContract } from '../../support/model-contract.js';

const samples = {
  tessera: await textPng(['TESSERA 2026']),
  twoLines: await textPng(['HELLO WORLD', 'TESSERA 2026'], { width: 1000 }),
  jpeg: await textImage(['OPEN SEARCH'], { background: '#f4f4dc', colour: '#202060' }).jpeg({ quality: 85 }).toBuffer(),
  blank: await solidImage(320, 200, '#ffffff').png().toBuffer(),
};

runModelContract(model, { sampleInputs: Object.values(samples), create: createTesseractOcrModel });

describe('tesseract-ocr reads drawn text', () => {
  it('reads lines top to bottom, words joined by spaces, each line with its box', async () => {
    const [one, two, jpeg, blank] = await model.infer([samples.tessera, samples.twoLines, samples.jpeg, samples.blank]);
    expect(one!.text).toBe('TESSERA 2026');
    expect(two!.text.split('\n')).toEqual(['HELLO WORLD', 'TESSERA 2026']);
    expect(two!.boxes[0]!.y + two!.boxes[0]!.height).toBeLessThanOrEqual(two!.boxes[1]!.y + 10);
    for (const box of two!.boxes) {
      expect(box.x).toBeGreaterThanOrEqual(30);
      expect(box.confidence).toBeGreaterThan(0.5);
      expect(box.confidence).toBeLessThanOrEqual(1);
    }
    expect(squash(jpeg!.text)).toBe('OPENSEARCH');
    expect(blank).toEqual({ text: '', boxes: [] });
  });

  it('groups TSV word rows into lines', () => {
    const tsv = [
      'level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext',
      '5\t1\t1\t1\t2\t1\t10\t60\t40\t20\t90\tsecond',
      '5\t1\t1\t1\t1\t1\t10\t10\t50\t20\t80\tfirst',
      '5\t1\t1\t1\t1\t2\t70\t12\t30\t20\t100\tline',
      '4\t1\t1\t1\t1\t0\t10\t10\t90\t22\t-1\t',
    ].join('\n');
    expect(linesFromTsv(tsv)).toEqual({
      text: 'first line\nsecond',
      boxes: [
        { text: 'first line', confidence: 0.9, x: 10, y: 10, width: 90, height: 22 },
        { text: 'second', confidence: 0.9, x: 10, y: 60, width: 40, height: 20 },
      ],
    });
  });

  it('fails to load with what to do when the program is missing', async () => {
    const saved = process.env.TESSERA_TESSERACT;
    process.env.TESSERA_TESSERACT = '/nonexistent/tesseract';
    try {
      const missing = createTesseractOcrModel();
      await expect(missing.load()).rejects.toBeInstanceOf(ServiceUnavailableError);
      await expect(missing.load()).rejects.toThrow(/apt-get install -y tesseract-ocr/);
    } finally {
      if (saved === undefined) delete process.env.TESSERA_TESSERACT;
      else process.env.TESSERA_TESSERACT = saved;
    }
  });
});
