/**
 * onnx: model folders with tiny real ONNX graphs the test builds itself (test/support/onnx), run by real
 * onnxruntime. The contract for a text, an image and an audio model; then what each promises (exact
 * pooled vectors, meaning, padding, truncation, preprocessing, resampling), folder discovery and the
 * errors a broken folder gives, and the same models served by an in-process inference worker and by a
 * spawned worker process that finds them through TESSERA_MODEL_DIR.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import sharp, { type Sharp } from 'sharp';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { InputError } from '../../../kernel/errors.js';
import { startInferenceWorkers, type InferenceRuntime } from '../../../kernel/inference/index.js';
import { InferenceClient } from '../../../kernel/inference/client.js';
import type { AudioClipInput } from '../../../kernel/inference/model-io.js';
import { startInferenceWorker, type InferenceWorker } from '../../../kernel/inference/worker.js';
import { PluginRegistry, loadPluginModules, type ModelPlugin } from '../../../kernel/plugins.js';
import {
  ModelFolderError,
  createOnnxModel as createAnyOnnxModel,
  createOnnxModels as createAnyOnnxModels,
  defaultModelName,
  readGraphSignature,
  readModelDirectory,
  readModelFolder,
  resampleLinear,
  type OnnxModelInput,
  type OnnxModelPlugin,
  type OnnxModelSpec,
} from '../../../plugins/models/onnx/index.js';
import {
  AUDIO_BIAS,
  IMAGE_PROJECTION,
  TEXT_MAX_LENGTH,
  expectedTextVector,
  tinyAudioModel,
  tinyImageModel,
  tinyTextFolderFiles,
  tinyTextModel,
  writeModelFolder,
  writeTinyOnnxModels,
} from '../../support/onnx/index.js';
import { runModelContract } from '../../support/model-contract.js';
import { silentLogger } from '../../support/logs.js';

const log = silentLogger();
// Every folder in these tests holds an embedding model (cross-encoders are tested in onnx-rerank.test.ts).
const createOnnxModel = (spec: OnnxModelSpec) => createAnyOnnxModel(spec) as OnnxModelPlugin;
const createOnnxModels = (dir: string | undefined) => createAnyOnnxModels(dir) as OnnxModelPlugin[];
const ONNX_PLUGIN = path.resolve(__dirname, '../../../plugins/models/onnx/index.ts');

// ------------------------------------------------------------------------------------------- fixtures
// The contract declares its suites at import, so the models and sample inputs are made here (top-level await).

const scratch = await mkdtemp(path.join(tmpdir(), 'tessera-onnx-'));
const modelDir = path.join(scratch, 'models');
const tiny = await writeTinyOnnxModels(modelDir);
const models = new Map(createOnnxModels(modelDir).map((m) => [m.name, m]));
const textModel = models.get(tiny.textModelName)!;
const imageModel = models.get(tiny.imageModelName)!;
const audioModel = models.get(tiny.audioModelName)!;

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** Typed views of the generic plugins, so tests pass each task's own input type. */
const embedTexts = (model: OnnxModelPlugin, texts: readonly unknown[]) => model.infer(texts as OnnxModelInput[]);

function solid(rgb: readonly [number, number, number], width = 20, height = 20): Sharp {
  return sharp({ create: { width, height, channels: 3, background: { r: rgb[0], g: rgb[1], b: rgb[2] } } });
}

/** A picture drawn column by column: `paint(x)` gives the colour of column x. */
function columns(width: number, height: number, paint: (x: number) => readonly [number, number, number]): Sharp {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) for (let x = 0; x < width; x++) raw.set(paint(x), (y * width + x) * 3);
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

function sine(frequency: number, sampleRate: number, seconds: number, amplitude = 0.5): AudioClipInput {
  const samples = Float32Array.from({ length: Math.round(sampleRate * seconds) }, (_, i) => amplitude * Math.sin((2 * Math.PI * frequency * i) / sampleRate));
  return { samples, sampleRate };
}

function noise(sampleRate: number, seconds: number, seed = 7): AudioClipInput {
  let s = seed;
  const samples = Float32Array.from({ length: Math.round(sampleRate * seconds) }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s / 2 ** 32) * 1.6 - 0.8;
  });
  return { samples, sampleRate };
}

const cos = (a: readonly number[], b: readonly number[]): number => a.reduce((s, x, i) => s + x * b[i]!, 0);
const unit = (v: readonly number[]): number[] => {
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
const expectClose = (actual: readonly number[], expected: readonly number[], digits = 6) => {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((x, i) => expect(x, `component ${i}`).toBeCloseTo(expected[i]!, digits));
};
/** What a vector looks like after a trip through gRPC (`repeated float`). */
const asFloat32 = (v: readonly number[]) => Array.from(Float32Array.from(v));

const longText = Array.from({ length: 40 }, (_, i) => ['cat', 'rain', 'bank', 'the'][i % 4]).join(' ');

const contractImages: Uint8Array[] = await Promise.all([
  solid([220, 20, 30]).png().toBuffer(),
  solid([20, 40, 220]).jpeg({ quality: 90 }).toBuffer(),
  solid([10, 200, 10], 30, 12).ensureAlpha(0.4).png().toBuffer(),
  columns(40, 10, (x) => [x * 6, 128, 255 - x * 6]).greyscale().png().toBuffer(),
  solid([255, 255, 255], 1, 1).png().toBuffer(),
]);

runModelContract(textModel, {
  sampleInputs: ['The cat and the dog', '', 'a kitten is my pet', 'Quarterly bank loan, market prices!', longText, 'zebras quantum'],
  expectDims: tiny.textDims,
  create: () => createOnnxModel(readModelFolder(path.join(modelDir, 'tiny-text'))),
});

runModelContract(imageModel, {
  sampleInputs: contractImages,
  expectDims: tiny.imageDims,
  create: () => createOnnxModel(readModelFolder(path.join(modelDir, 'tiny-image'))),
});

runModelContract(audioModel, {
  sampleInputs: [sine(440, 16_000, 0.25), noise(8_000, 0.1), sine(1000, 44_100, 0.05, 0.9), { samples: Float32Array.from([0.5, -0.5, 0.25, 0]), sampleRate: 16_000 }],
  expectDims: tiny.audioDims,
  create: () => createOnnxModel(readModelFolder(path.join(modelDir, 'tiny-audio'))),
});

// ------------------------------------------------------------------------------------------- text

describe('onnx text model', () => {
  it('is named after its folder, with dims read from the graph', () => {
    expect(textModel.name).toBe('onnx-tiny-text');
    expect(textModel.task).toBe('embed_text');
    expect(textModel.dims).toBe(8);
  });

  it('embeds the masked mean of the token embeddings, L2-normalised (WordPiece, lower-casing, [UNK])', async () => {
    const [plain, pieces, unknown] = await embedTexts(textModel, ['The cat', 'Cats playing', 'zebra']);
    expectClose(plain!, expectedTextVector(['[CLS]', 'the', 'cat', '[SEP]']));
    expectClose(pieces!, expectedTextVector(['[CLS]', 'cat', '##s', '[UNK]', '[SEP]']));
    expectClose(unknown!, expectedTextVector(['[CLS]', '[UNK]', '[SEP]']));
    expect(Math.hypot(...plain!)).toBeCloseTo(1, 12);
  });

  it('puts texts about the same thing closer than unrelated ones', async () => {
    const [animals, pets, money, weather] = await embedTexts(textModel, [
      'the cat and the dog',
      'a kitten is my pet',
      'the bank raised the loan price',
      'rain and snow in the storm',
    ]);
    expect(cos(animals!, pets!)).toBeGreaterThan(0.9);
    expect(cos(animals!, pets!)).toBeGreaterThan(cos(animals!, money!) + 0.5);
    expect(cos(animals!, pets!)).toBeGreaterThan(cos(animals!, weather!) + 0.5);
    expect(cos(money!, weather!)).toBeLessThan(0.5);
  });

  it('padding never changes a text: a short text batched with a long one equals the short text alone', async () => {
    // [PAD]'s row is huge and masked positions get +7 from the graph, so any leak would move the vector.
    const [alone] = await embedTexts(textModel, ['cat']);
    const [short, long] = await embedTexts(textModel, ['cat', 'the cat and the dog in the rain']);
    expect(short).toEqual(alone);
    const [longAlone] = await embedTexts(textModel, ['the cat and the dog in the rain']);
    expect(long).toEqual(longAlone);
    expectClose(short!, expectedTextVector(['[CLS]', 'cat', '[SEP]']));
  });

  it(`truncates to tokenizer_config's model_max_length (${TEXT_MAX_LENGTH}), keeping [CLS] and [SEP]`, async () => {
    const words = longText.split(' ');
    const [vector] = await embedTexts(textModel, [longText]);
    expectClose(vector!, expectedTextVector(['[CLS]', ...words.slice(0, TEXT_MAX_LENGTH - 2), '[SEP]']));
    // Texts past the limit that share the first tokens embed the same.
    const [longer] = await embedTexts(textModel, [`${longText} storm storm storm`]);
    expect(longer).toEqual(vector);
  });

  it('max_length, pooling and normalize from the manifest', async () => {
    const dir = path.join(scratch, 'variants-text');
    await writeModelFolder(path.join(dir, 'short'), tinyTextFolderFiles({ task: 'embed_text', max_length: 4 }));
    await writeModelFolder(path.join(dir, 'cls'), tinyTextFolderFiles({ name: 'first-token', pooling: 'cls', normalize: false }));
    const variants = createOnnxModels(dir);
    expect(variants.map((m) => m.name)).toEqual(['first-token', 'onnx-short']); // folder order: cls, short
    const [cls, short] = variants;
    const [truncated] = await embedTexts(short!, ['the cat and the dog']);
    expectClose(truncated!, expectedTextVector(['[CLS]', 'the', 'cat', '[SEP]']));
    // cls: the first position ([CLS]) as it comes out of the graph, not normalised.
    const raw = await embedTexts(cls!, ['the cat', 'rain and snow']);
    expectClose(raw[0]!, [0, 0, 0, 0, 0, 0, 0, 0.5]);
    expect(raw[1]).toEqual(raw[0]);
  });

  it('a graph with a fixed sequence length gets every batch padded to it, and texts cut to it', async () => {
    const folder = await writeModelFolder(path.join(scratch, 'variants-fixed', 'fixed'), {
      ...tinyTextFolderFiles(),
      'model.onnx': tinyTextModel({ sequence: 6 }),
    });
    const fixed = createOnnxModel(readModelFolder(folder));
    const [short, long] = await embedTexts(fixed, ['the cat', 'the cat and the dog in the rain']);
    expectClose(short!, expectedTextVector(['[CLS]', 'the', 'cat', '[SEP]']));
    expectClose(long!, expectedTextVector(['[CLS]', 'the', 'cat', 'and', 'the', '[SEP]']));
    // Alone, the short text is still fed as 6 positions (onnxruntime refuses any other length).
    expect(await embedTexts(fixed, ['the cat'])).toEqual([short]);
  });

  it('refuses an input that is not a string with an InputError', async () => {
    await expect(embedTexts(textModel, ['fine', 42])).rejects.toThrow(InputError);
    await expect(embedTexts(textModel, ['fine', 42])).rejects.toThrow(/input 1 is not a string/);
  });
});

// ------------------------------------------------------------------------------------------- image

describe('onnx image model', () => {
  // mean = std = 0.5: a channel at 255 becomes 1, at 0 becomes −1; the graph appends (r + g + b) / 2.
  const expectedFor = ([r, g, b]: readonly [number, number, number]) => {
    const x = [r, g, b].map((c) => c / 255 / 0.5 - 1);
    return unit(IMAGE_PROJECTION[0]!.map((_, j) => x.reduce((s, xc, c) => s + xc * IMAGE_PROJECTION[c]![j]!, 0)));
  };

  it('reads its size from the graph and gives red and blue the vectors of their mean colours', async () => {
    expect(imageModel.dims).toBe(4);
    const red = await solid([255, 0, 0]).png().toBuffer();
    const blue = await solid([0, 0, 255]).png().toBuffer();
    const darkRed = await solid([160, 0, 0], 50, 50).png().toBuffer();
    const [r, b, dr] = await imageModel.infer([red, blue, darkRed]);
    expectClose(r!, expectedFor([255, 0, 0]));
    expectClose(b!, expectedFor([0, 0, 255]));
    expectClose(dr!, expectedFor([160, 0, 0]), 4);
    expect(cos(r!, dr!)).toBeGreaterThan(cos(r!, b!) + 0.3);
  });

  it('resizes with cover: a wide picture is centre-cropped, not squeezed', async () => {
    // 40×20: green edges, red middle half. Cover (scale to 32×16, crop the middle 16) keeps the red half.
    const wide = await columns(40, 20, (x) => (x >= 10 && x < 30 ? [255, 0, 0] : [0, 255, 0])).png().toBuffer();
    const [vector] = await imageModel.infer([wide]);
    const red = expectedFor([255, 0, 0]);
    const squeezed = expectedFor([128, 128, 0]);
    expect(cos(vector!, red)).toBeGreaterThan(0.99);
    expect(cos(vector!, red)).toBeGreaterThan(cos(vector!, squeezed) + 0.05);
  });

  it('honours channel_order bgr from the manifest', async () => {
    const dir = path.join(scratch, 'variants-image');
    await writeModelFolder(path.join(dir, 'bgr'), {
      'model.onnx': tinyImageModel(),
      'tessera-model.json': { channel_order: 'bgr', image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5] },
    });
    const [bgr] = createOnnxModels(dir);
    expect(bgr!.task).toBe('embed_image'); // no task in the manifest: read from the pixel_values input
    const [vector] = await bgr!.infer([await solid([255, 0, 0]).png().toBuffer()]);
    expectClose(vector!, expectedFor([0, 0, 255]));
  });

  it('an undecodable image is an InputError naming its index', async () => {
    const good = await solid([1, 2, 3]).png().toBuffer();
    const call = imageModel.infer([good, Buffer.from('not an image at all')]);
    await expect(call).rejects.toThrow(InputError);
    await expect(imageModel.infer([good, Buffer.from('not an image at all')])).rejects.toThrow(/image 1 could not be decoded/);
    await expect(imageModel.infer(['text' as unknown as Uint8Array])).rejects.toThrow(/input 0 is not image bytes/);
  });
});

// ------------------------------------------------------------------------------------------- audio

describe('onnx audio model', () => {
  it('feeds the waveform as is at the model rate: [mean |x|, mean x², max x] + bias', async () => {
    const [vector] = await audioModel.infer([{ samples: Float32Array.from([0.5, -0.5, 0.25, 0]), sampleRate: 16_000 }]);
    expectClose(vector!, unit([0.3125 + AUDIO_BIAS, 0.140625 + AUDIO_BIAS, 0.5 + AUDIO_BIAS]));
  });

  it('resamples other rates linearly to the model rate (16 kHz) before the graph sees them', async () => {
    // At 8 kHz [0, 1, 0, −1] becomes [0, .5, 1, .5, 0, −.5, −1, −1]: mean |x| 4.5/8, mean x² 3.75/8, max 1
    // (fed unresampled it would be 0.5, 0.5, 1).
    const [vector] = await audioModel.infer([{ samples: Float32Array.from([0, 1, 0, -1]), sampleRate: 8_000 }]);
    expectClose(vector!, unit([4.5 / 8 + AUDIO_BIAS, 3.75 / 8 + AUDIO_BIAS, 1 + AUDIO_BIAS]));
  });

  it('one sound at 8, 16 and 44.1 kHz embeds alike', async () => {
    const click = Float32Array.from({ length: 4000 }, (_, i) => (i === 2000 ? 0.9 : 0));
    const [at8, at16, at44, clicked] = await audioModel.infer([
      sine(440, 8_000, 0.25),
      sine(440, 16_000, 0.25),
      sine(440, 44_100, 0.25),
      { samples: click, sampleRate: 16_000 },
    ]);
    expect(cos(at8!, at16!)).toBeGreaterThan(0.999);
    expect(cos(at44!, at16!)).toBeGreaterThan(0.999);
    expect(cos(clicked!, at16!)).toBeLessThan(0.9);
  });

  it('resampleLinear interpolates between neighbours and keeps the duration', () => {
    const up = resampleLinear(Float32Array.from([0, 1, 0, -1]), 8_000, 16_000);
    expect(Array.from(up)).toEqual([0, 0.5, 1, 0.5, 0, -0.5, -1, -1]);
    const down = resampleLinear(Float32Array.from({ length: 441 }, (_, i) => i), 44_100, 16_000);
    expect(down).toHaveLength(160);
    expect(down[1]).toBeCloseTo(2.75625, 4);
  });

  it('refuses a clip without samples or rate with an InputError', async () => {
    await expect(audioModel.infer([{ samples: new Float32Array(0), sampleRate: 16_000 }])).rejects.toThrow(InputError);
    await expect(audioModel.infer([{ samples: [0.1] as unknown as Float32Array, sampleRate: 16_000 }])).rejects.toThrow(/input 0 needs samples/);
  });
});

// ------------------------------------------------------------------------------------------- folders

describe('onnx model folders', () => {
  it('reads the graph signature from the file header, as onnxruntime sees it', async () => {
    const file = path.join(modelDir, 'tiny-text', 'model.onnx');
    const signature = readGraphSignature(file);
    expect(signature.inputs.map((i) => [i.name, i.elemType, i.shape])).toEqual([
      ['input_ids', 7, ['batch', 'sequence']],
      ['token_type_ids', 7, ['batch', 'sequence']],
      ['attention_mask', 7, ['batch', 'sequence']],
    ]);
    expect(signature.outputs).toEqual([{ name: 'last_hidden_state', elemType: 1, shape: ['batch', 'sequence', 8] }]);
    const session = await ort.InferenceSession.create(file);
    try {
      expect(session.inputNames).toEqual(signature.inputs.map((i) => i.name));
      expect(session.outputNames).toEqual(signature.outputs.map((o) => o.name));
    } finally {
      await session.release();
    }
    expect(readGraphSignature(path.join(modelDir, 'tiny-image', 'model.onnx')).inputs[0]!.shape).toEqual(['batch', 3, 16, 16]);
  });

  it('one model per folder, in name order; other and hidden folders are skipped; no directory → no models', async () => {
    const dir = path.join(scratch, 'discovery');
    await writeTinyOnnxModels(dir);
    await mkdir(path.join(dir, 'notes'));
    await writeFile(path.join(dir, 'notes', 'readme.txt'), 'not a model');
    await writeFile(path.join(dir, 'loose-file.onnx'), 'ignored: models live in folders');
    await writeModelFolder(path.join(dir, '.cache'), { 'model.onnx': 'garbage that would fail if read' });
    await symlink(path.join(scratch, 'nowhere'), path.join(dir, 'dangling-link'));
    expect(readModelDirectory(dir).map((s) => [s.name, s.task, s.task === 'rerank' ? null : s.dims])).toEqual([
      ['onnx-tiny-audio', 'embed_audio', 3],
      ['onnx-tiny-image', 'embed_image', 4],
      ['onnx-tiny-text', 'embed_text', 8],
    ]);
    expect(createOnnxModels(path.join(scratch, 'does-not-exist'))).toEqual([]);
    expect(createOnnxModels(undefined)).toEqual([]);
    expect(createOnnxModels('')).toEqual([]);
    expect(defaultModelName('/models/All MiniLM L6 v2')).toBe('onnx-all-minilm-l6-v2');
  });

  it('the module default export is the list for TESSERA_MODEL_DIR, and the plugin loader registers it', async () => {
    try {
      vi.stubEnv('TESSERA_MODEL_DIR', modelDir);
      vi.resetModules();
      const registry = new PluginRegistry();
      await loadPluginModules(registry, [ONNX_PLUGIN], scratch);
      expect([...registry.models.keys()].sort()).toEqual(['onnx-tiny-audio', 'onnx-tiny-image', 'onnx-tiny-text']);
      expect(registry.models.get('onnx-tiny-text')!.dims).toBe(8);

      vi.stubEnv('TESSERA_MODEL_DIR', '');
      vi.resetModules();
      const unset = (await import('../../../plugins/models/onnx/index.js')) as { default: unknown };
      expect(unset.default).toEqual([]);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });

  describe('a broken folder fails with a ModelFolderError naming it', () => {
    let root: string;
    let n = 0;
    beforeAll(async () => {
      root = path.join(scratch, 'broken');
      await mkdir(root);
    });

    /** Writes `files` as a fresh folder and returns the error reading it gives. */
    async function errorFor(files: Record<string, Uint8Array | string | object>): Promise<ModelFolderError> {
      const folder = await writeModelFolder(path.join(root, `case-${++n}`), files);
      try {
        readModelFolder(folder);
      } catch (error) {
        expect(error).toBeInstanceOf(ModelFolderError);
        expect((error as Error).message).toContain(folder);
        return error as ModelFolderError;
      }
      throw new Error(`${folder} was accepted`);
    }

    const text = tinyTextFolderFiles();
    const withManifest = (manifest: unknown) => ({ ...text, 'tessera-model.json': typeof manifest === 'string' ? manifest : (manifest as object) });

    it('manifest problems: not JSON, unknown fields, bad values', async () => {
      expect((await errorFor(withManifest('{ "task": '))).message).toMatch(/tessera-model\.json is not readable JSON/);
      expect((await errorFor(withManifest({ task: 'embed_text', poolin: 'mean' }))).message).toMatch(/unknown field 'poolin'/);
      expect((await errorFor(withManifest({ task: 'embed_video' }))).message).toMatch(/task must be equal to one of the allowed values/);
      expect((await errorFor(withManifest({ name: 'Has Spaces' }))).message).toMatch(/name must match pattern/);
      expect((await errorFor(withManifest({ image_mean: [0.5, 0.5] }))).message).toMatch(/image_mean must NOT have fewer than 3 items/);
    });

    it('files: no model, not an ONNX model, a text model without tokenizer.json', async () => {
      expect((await errorFor({ 'tessera-model.json': { task: 'embed_text' } })).message).toMatch(/no model file model\.onnx/);
      expect((await errorFor({ 'model.onnx': 'this is not protobuf \u0000\u0007' })).message).toMatch(/model\.onnx: not an ONNX model/);
      const { 'tokenizer.json': _tokenizer, ...noTokenizer } = text;
      expect((await errorFor(noTokenizer)).message).toMatch(/a text model needs tokenizer\.json/);
      expect((await errorFor({ ...text, 'tokenizer_config.json': '[1, 2' })).message).toMatch(/tokenizer_config\.json is not readable JSON/);
    });

    it('graph mismatches: tensor names, task, output, dims, pooling, image size', async () => {
      expect((await errorFor(withManifest({ inputs: { input_ids: 'ids' } }))).message).toMatch(/the graph has no input 'ids' \(for input_ids\)/);
      expect((await errorFor(withManifest({ task: 'embed_image' }))).message).toMatch(/the graph has no input 'pixel_values'/);
      expect((await errorFor(withManifest({ inputs: { pixel_values: 'x' } }))).message).toMatch(/inputs\.pixel_values is not an input of embed_text models/);
      expect((await errorFor(withManifest({ output: 'pooler_output' }))).message).toMatch(/no output 'pooler_output'; its outputs are: last_hidden_state/);
      expect((await errorFor(withManifest({ dims: 384 }))).message).toMatch(/dims is 384 .* has 8/);
      expect((await errorFor(withManifest({ pooling: 'none' }))).message).toMatch(/pooling must be "mean" or "cls"/);
      const audio = { 'model.onnx': tinyAudioModel() };
      expect((await errorFor({ ...audio, 'tessera-model.json': { task: 'embed_audio', pooling: 'mean' } })).message).toMatch(/already \[batch, dims\]/);
      expect((await errorFor({ 'model.onnx': tinyImageModel(), 'tessera-model.json': { image_size: 224 } })).message).toMatch(
        /image size 224×224 does not fit input 'pixel_values', which is fixed at 16×16/,
      );
      // A text graph fed to an audio task: input_values is missing, and its own inputs cannot be fed.
      expect((await errorFor({ 'model.onnx': text['model.onnx']!, 'tessera-model.json': { task: 'embed_audio' } })).message).toMatch(
        /no input 'input_values'/,
      );
      expect((await errorFor({ 'model.onnx': text['model.onnx']!, 'tessera-model.json': { task: 'embed_audio', inputs: { input_values: 'input_ids' } } })).message).toMatch(
        /the graph input\(s\) token_type_ids cannot be fed: embed_audio models get input_values, attention_mask/,
      );
    });

    it('two folders claiming one name', async () => {
      const dir = path.join(scratch, 'duplicates');
      await writeModelFolder(path.join(dir, 'a'), { 'model.onnx': tinyImageModel(), 'tessera-model.json': { name: 'same-name' } });
      await writeModelFolder(path.join(dir, 'b'), { 'model.onnx': tinyImageModel(), 'tessera-model.json': { name: 'same-name' } });
      expect(() => createOnnxModels(dir)).toThrow(ModelFolderError);
      expect(() => createOnnxModels(dir)).toThrow(new RegExp(`${path.join(dir, 'b')}.*'same-name' is already used by ${path.join(dir, 'a')}`));
    });
  });
});

// ------------------------------------------------------------------------------------------- served

describe('onnx models served by inference workers', () => {
  let worker: InferenceWorker;
  let client: InferenceClient;

  beforeAll(async () => {
    // Fresh instances: the worker loads them itself on first use.
    const served: Array<ModelPlugin<never, unknown>> = createOnnxModels(modelDir);
    worker = await startInferenceWorker({ models: served, address: '127.0.0.1:0', log });
    client = new InferenceClient({ addresses: [worker.address], log, timeoutMs: 30_000 });
  });

  afterAll(async () => {
    client?.close();
    await worker?.stop(1_000);
  });

  it('lists the models with their dims and embeds text, images and audio end to end', async () => {
    const listed = await client.listModels();
    expect(listed.map((m) => [m.name, m.task, m.dims]).sort()).toEqual([
      ['onnx-tiny-audio', 'embed_audio', 3],
      ['onnx-tiny-image', 'embed_image', 4],
      ['onnx-tiny-text', 'embed_text', 8],
    ]);
    const texts = ['the cat and the dog', 'rain in the storm', ''];
    expect(await client.embedText(tiny.textModelName, texts)).toEqual((await embedTexts(textModel, texts)).map(asFloat32));

    const images = [await solid([255, 0, 0]).png().toBuffer(), await solid([0, 0, 255]).jpeg().toBuffer()];
    const embedded = await client.embedImage(tiny.imageModelName, images);
    expect(embedded.map((e) => e.vector)).toEqual((await imageModel.infer(images)).map(asFloat32));
    expect(embedded[0]!.extras).toEqual({});

    const clips = [sine(440, 8_000, 0.1), noise(16_000, 0.05)];
    expect((await client.embedAudio(tiny.audioModelName, clips)).map((e) => e.vector)).toEqual((await audioModel.infer(clips)).map(asFloat32));
  });

  it('a bad image comes back as an InputError, and the worker keeps serving', async () => {
    await expect(client.embedImage(tiny.imageModelName, [Buffer.from('garbage bytes')])).rejects.toThrow(InputError);
    await expect(client.embedImage(tiny.imageModelName, [Buffer.from('garbage bytes')])).rejects.toThrow(/could not be decoded/);
    expect(await client.embedText(tiny.textModelName, ['cat'])).toHaveLength(1);
  });

  it('a spawned worker process finds the models through TESSERA_MODEL_DIR', async () => {
    let runtime: InferenceRuntime | undefined;
    try {
      runtime = await startInferenceWorkers({
        plugins: [ONNX_PLUGIN],
        workers: 1,
        log,
        pool: { logLevel: 'silent', env: { TESSERA_MODEL_DIR: modelDir }, shutdownGraceMs: 2_000 },
        client: { timeoutMs: 30_000 },
      });
      const texts = ['a kitten is my pet', 'the bank loan'];
      expect(await runtime.client.embedText(tiny.textModelName, texts)).toEqual((await embedTexts(textModel, texts)).map(asFloat32));
    } finally {
      await runtime?.stop();
    }
  });
});
