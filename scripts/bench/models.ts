/**
 * `npx tsx scripts/bench/models.ts [seconds]`: throughput of the built-in offline models, called directly
 * in this process (no gRPC), on inputs generated here: short and long texts through hashed-ngram-text,
 * 256×256 JPEGs through image-descriptor, 16 kHz and 44.1 kHz audio through log-mel-audio. Each case
 * warms up, then runs for about `seconds` (default 3) and prints items/s.
 */
import os from 'node:os';
import sharp from 'sharp';
import textModel from '../../plugins/models/hashed-ngram-text/index.js';
import imageModel from '../../plugins/models/image-descriptor/index.js';
import audioModel from '../../plugins/models/log-mel-audio/index.js';

const seconds = Number(process.argv[2] ?? 3);

function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return s / 2 ** 32;
  };
}
const random = lcg(42);

/** Runs `batch` repeatedly for about `seconds`; returns items per second. */
async function measure(itemsPerCall: number, call: () => Promise<unknown>): Promise<number> {
  await call(); // warm up (JIT, sharp's first load)
  let items = 0;
  const start = performance.now();
  while (performance.now() - start < seconds * 1000) {
    await call();
    items += itemsPerCall;
  }
  return items / ((performance.now() - start) / 1000);
}

const fmt = (n: number): string => n.toLocaleString('en-US', { maximumFractionDigits: n < 100 ? 1 : 0 });

// Texts: sentences from a small made-up vocabulary (long enough that words repeat, like real text).
const vocabulary = Array.from({ length: 2000 }, () => {
  const len = 2 + Math.floor(random() * 9);
  return Array.from({ length: len }, () => String.fromCharCode(97 + Math.floor(random() * 26))).join('');
});
const sentence = (words: number): string => Array.from({ length: words }, () => vocabulary[Math.floor(random() * vocabulary.length)]).join(' ');
const shortTexts = Array.from({ length: 1024 }, () => sentence(8 + Math.floor(random() * 9)));
const longTexts = Array.from({ length: 64 }, () => sentence(180));

// Images: 256×256 JPEGs of gradients, blocks and noise.
async function jpeg(i: number): Promise<Buffer> {
  const raw = Buffer.alloc(256 * 256 * 3);
  const [ox, oy, r] = [random() * 256, random() * 256, 20 + random() * 80];
  for (let y = 0; y < 256; y++) {
    for (let x = 0; x < 256; x++) {
      const inside = (x - ox) ** 2 + (y - oy) ** 2 < r * r;
      const n = random() * 40;
      raw.set(inside ? [200 - n, (i * 37) % 256, 40 + n] : [x, y, (i * 53 + n) % 256], (y * 256 + x) * 3);
    }
  }
  return sharp(raw, { raw: { width: 256, height: 256, channels: 3 } }).jpeg({ quality: 85 }).toBuffer();
}
const images = await Promise.all(Array.from({ length: 64 }, (_, i) => jpeg(i)));

// Audio: a minute of noisy, chord-like sound at two rates.
function clip(rate: number, secs: number): Float32Array {
  return Float32Array.from({ length: rate * secs }, (_, i) => {
    const t = i / rate;
    return 0.3 * Math.sin(2 * Math.PI * 220 * t) + 0.2 * Math.sin(2 * Math.PI * 1330 * t) + 0.1 * (random() * 2 - 1);
  });
}
const audio16 = { samples: clip(16000, 60), sampleRate: 16000 };
const audio44 = { samples: clip(44100, 60), sampleRate: 44100 };

await Promise.all([textModel.load(), imageModel.load(), audioModel.load()]);

const shortChars = shortTexts.reduce((s, t) => s + t.length, 0) / shortTexts.length;
const longChars = longTexts.reduce((s, t) => s + t.length, 0) / longTexts.length;
console.log(`node ${process.version}, ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), ~${seconds}s per case, one process`);
const shortRate = await measure(shortTexts.length, () => textModel.infer(shortTexts));
console.log(`hashed-ngram-text  short texts (~${Math.round(shortChars)} chars): ${fmt(shortRate)} texts/s`);
const longRate = await measure(longTexts.length, () => textModel.infer(longTexts));
console.log(`hashed-ngram-text  long texts (~${Math.round(longChars)} chars):  ${fmt(longRate)} texts/s`);
const imageRate = await measure(images.length, () => imageModel.infer(images));
console.log(`image-descriptor   256×256 JPEG, batches of ${images.length}: ${fmt(imageRate)} images/s (sharp on ${process.env.UV_THREADPOOL_SIZE ?? 4} libuv threads)`);
const oneRate = await measure(1, () => imageModel.infer([images[0]!]));
console.log(`image-descriptor   256×256 JPEG, one at a time:  ${fmt(oneRate)} images/s`);
const a16 = await measure(60, () => audioModel.infer([audio16]));
console.log(`log-mel-audio      16 kHz mono: ${fmt(a16)} s of audio per second`);
const a44 = await measure(60, () => audioModel.infer([audio44]));
console.log(`log-mel-audio      44.1 kHz mono: ${fmt(a44)} s of audio per second`);
