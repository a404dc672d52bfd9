/** Test and benchmark embeddings (no test runner imports here: scripts/bench uses it too). */
import { seededRandom } from '../../kernel/random.js';

/**
 * Vectors shaped like embeddings: points around `clusters` centres in a small latent space, projected
 * to `dims` by a fixed random matrix, plus a little noise in every dimension, then unit length. (A
 * uniform cloud in 384 dimensions has no near neighbours to speak of; no ANN index is built for it.)
 */
export function clusteredVectors(n: number, dims: number, seed: number, options: { clusters?: number; latentDims?: number } = {}): number[][] {
  const clusters = options.clusters ?? 20;
  const latent = Math.min(dims, options.latentDims ?? 16);
  const structure = seededRandom(1_234); // the same space for every seed: queries and data share it
  const rand = seededRandom(seed);
  const gauss = (r: () => number) => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const projection = Array.from({ length: dims }, () => Array.from({ length: latent }, () => gauss(structure)));
  const centres = Array.from({ length: clusters }, () => Array.from({ length: latent }, () => gauss(structure)));
  return Array.from({ length: n }, () => {
    const c = centres[Math.floor(rand() * clusters)]!;
    const z = c.map((x) => x + 0.5 * gauss(rand));
    const v = projection.map((row) => row.reduce((sum, w, j) => sum + w * z[j]!, 0) + 0.3 * gauss(rand));
    const norm = Math.hypot(...v);
    return v.map((x) => Math.fround(x / norm));
  });
}
