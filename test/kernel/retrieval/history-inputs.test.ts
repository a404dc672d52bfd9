import { describe, expect, it } from 'vitest';
import { packInputs, unpackInputs } from '../../../kernel/retrieval/history-inputs.js';

describe('execution inputs as the history stores them', () => {
  const vector = Array.from({ length: 40 }, (_, i) => Math.cos(i) * 1e-3 + i);

  it.each([
    ['plain values', { q: 'lamp', n: 3, on: true, none: null }],
    ['a short list stays JSON', { ids: [1, 2, 3] }],
    ['a vector', { vector }],
    ['vectors nested in objects and lists', { a: { b: [vector, { c: vector }] }, d: [[1, 2], vector.slice(0, 16)] }],
    ['a long list that is not all numbers', { mixed: [...vector, 'x'] }],
    ['extreme numbers', { v: [Number.MAX_VALUE, -Number.MIN_VALUE, 0, -0, 1e-310, ...vector] }],
    ['float32 vectors (packed as 4 bytes a number)', { vector: Array.from(new Float32Array(vector)), other: [Array.from(new Float32Array(vector.slice(0, 20))), 7] }],
    ['float32 and float64 vectors together', { a: Array.from(new Float32Array(vector)), b: vector }],
    ['a value shaped like the packed envelope', { inputs: null, paths: [['vector']], f64: 'AAAA', vector }],
    ['an empty object', {}],
  ])('gives back %s exactly', (_name, inputs) => {
    const stored = packInputs(inputs as Record<string, unknown>);
    expect(unpackInputs(stored)).toStrictEqual(inputs);
  });

  it('keeps a key named __proto__ as a key', () => {
    const inputs = JSON.parse(`{"__proto__": {"vector": ${JSON.stringify(vector)}}, "q": 1}`) as Record<string, unknown>;
    const back = unpackInputs(packInputs(inputs));
    expect(Object.getPrototypeOf(back)).toBe(Object.prototype);
    expect(JSON.stringify(back)).toBe(JSON.stringify(inputs));
  });

  it('packs vectors into fewer characters than their JSON, and leaves inputs without one as JSON', () => {
    const long = { vector: Array.from({ length: 384 }, (_, i) => Math.sin(i)) };
    expect(packInputs(long).length).toBeLessThan(JSON.stringify(long).length * 0.6);
    expect(packInputs({ q: 'x' })).toBe('{"q":"x"}');
    const single = { vector: Array.from(new Float32Array(long.vector)) };
    expect(packInputs(single)).toContain('"f32"');
    expect(packInputs(single).length).toBeLessThan(JSON.stringify(single).length * 0.35);
  });

  it('reads rows written before packing (jsonb objects) and plain JSON text', () => {
    expect(unpackInputs({ q: 'old' })).toEqual({ q: 'old' });
    expect(unpackInputs('{"q":"text"}')).toEqual({ q: 'text' });
  });
});
