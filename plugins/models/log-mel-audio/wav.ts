/**
 * Minimal RIFF/WAVE reader and writer, so audio can be fed to the model without ffmpeg: reads PCM
 * integer (8/16/24/32-bit) and IEEE float (32/64-bit) data, plain or WAVE_FORMAT_EXTENSIBLE, and mixes
 * all channels down to mono (their mean).
 */

export interface DecodedWav {
  /** Mono samples in -1..1. */
  samples: Float32Array;
  sampleRate: number;
  /** Channels in the file, before the mix-down. */
  channels: number;
}

export type WavEncoding = 'pcm16' | 'float32';

const FORMAT_PCM = 1;
const FORMAT_FLOAT = 3;
const FORMAT_EXTENSIBLE = 0xfffe;

function tag(view: DataView, at: number): string {
  return String.fromCharCode(view.getUint8(at), view.getUint8(at + 1), view.getUint8(at + 2), view.getUint8(at + 3));
}

export function decodeWav(bytes: Uint8Array): DecodedWav {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength < 12 || tag(view, 0) !== 'RIFF' || tag(view, 8) !== 'WAVE') throw new Error('not a RIFF/WAVE file');
  let format: { code: number; channels: number; sampleRate: number; bits: number; blockAlign: number } | undefined;
  let data: { offset: number; length: number } | undefined;
  let at = 12;
  while (at + 8 <= bytes.byteLength) {
    const id = tag(view, at);
    const size = view.getUint32(at + 4, true);
    const body = at + 8;
    if (id === 'fmt ') {
      if (size < 16) throw new Error('WAV fmt chunk too short');
      let code = view.getUint16(body, true);
      // Extensible: the real format code is the first two bytes of the sub-format GUID.
      if (code === FORMAT_EXTENSIBLE && size >= 40) code = view.getUint16(body + 24, true);
      format = {
        code,
        channels: view.getUint16(body + 2, true),
        sampleRate: view.getUint32(body + 4, true),
        blockAlign: view.getUint16(body + 12, true),
        bits: view.getUint16(body + 14, true),
      };
    } else if (id === 'data') {
      // Streamed writers leave the size at 0 or 0xFFFFFFFF: take what the file has.
      const length = size === 0 || body + size > bytes.byteLength ? bytes.byteLength - body : size;
      data = { offset: body, length };
      break;
    }
    at = body + size + (size & 1); // chunks are word-aligned
  }
  if (!format) throw new Error('WAV has no fmt chunk');
  if (!data) throw new Error('WAV has no data chunk');
  const { code, channels, sampleRate, bits } = format;
  if (channels < 1) throw new Error('WAV has no channels');
  const bytesPerSample = bits / 8;
  const supported =
    (code === FORMAT_PCM && [8, 16, 24, 32].includes(bits)) || (code === FORMAT_FLOAT && (bits === 32 || bits === 64));
  if (!supported) throw new Error(`unsupported WAV encoding: format ${code}, ${bits} bits`);
  const blockAlign = format.blockAlign || channels * bytesPerSample;
  const frames = Math.floor(data.length / blockAlign);
  const read = (p: number): number => {
    if (code === FORMAT_FLOAT) return bits === 32 ? view.getFloat32(p, true) : view.getFloat64(p, true);
    switch (bits) {
      case 8:
        return (view.getUint8(p) - 128) / 128; // 8-bit WAV is unsigned
      case 16:
        return view.getInt16(p, true) / 32768;
      case 24: {
        const v = view.getUint8(p) | (view.getUint8(p + 1) << 8) | (view.getInt8(p + 2) << 16);
        return v / 8388608;
      }
      default:
        return view.getInt32(p, true) / 2147483648;
    }
  };
  const samples = new Float32Array(frames);
  for (let f = 0; f < frames; f++) {
    const base = data.offset + f * blockAlign;
    let sum = 0;
    for (let c = 0; c < channels; c++) sum += read(base + c * bytesPerSample);
    samples[f] = sum / channels;
  }
  return { samples, sampleRate, channels };
}

/** Writes channels (equal lengths, -1..1) as a WAV file; pcm16 clips to range, float32 keeps values. */
export function encodeWav(channels: readonly ArrayLike<number>[], sampleRate: number, encoding: WavEncoding = 'pcm16'): Uint8Array {
  const count = channels.length;
  if (count < 1) throw new RangeError('need at least one channel');
  const frames = channels[0]!.length;
  if (channels.some((c) => c.length !== frames)) throw new RangeError('channels differ in length');
  const bytesPerSample = encoding === 'pcm16' ? 2 : 4;
  const dataLength = frames * count * bytesPerSample;
  const out = new Uint8Array(44 + dataLength);
  const view = new DataView(out.buffer);
  const writeTag = (at: number, s: string): void => {
    for (let i = 0; i < 4; i++) view.setUint8(at + i, s.charCodeAt(i));
  };
  writeTag(0, 'RIFF');
  view.setUint32(4, 36 + dataLength, true);
  writeTag(8, 'WAVE');
  writeTag(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, encoding === 'pcm16' ? FORMAT_PCM : FORMAT_FLOAT, true);
  view.setUint16(22, count, true);
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * count * bytesPerSample, true);
  view.setUint16(32, count * bytesPerSample, true);
  view.setUint16(34, bytesPerSample * 8, true);
  writeTag(36, 'data');
  view.setUint32(40, dataLength, true);
  let p = 44;
  for (let f = 0; f < frames; f++) {
    for (let c = 0; c < count; c++) {
      const x = channels[c]![f]!;
      if (encoding === 'pcm16') view.setInt16(p, Math.round(Math.max(-1, Math.min(1, x)) * 32767), true);
      else view.setFloat32(p, x, true);
      p += bytesPerSample;
    }
  }
  return out;
}
