/**
 * The source a worker thread is started with (eval) to run one of the kernel's modules: the TypeScript file
 * under tsx (registered in the thread first, as the server runs from its sources) or the built JavaScript.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** `caller`: the starting module's import.meta.url; `entry`: the thread's module beside it, without extension. */
export function threadEntrySource(caller: string, entry: string): string {
  const self = fileURLToPath(caller);
  const ext = path.extname(self);
  const url = pathToFileURL(path.join(path.dirname(self), `${entry}${ext}`)).href;
  if (ext !== '.ts') return `await import(${JSON.stringify(url)});`;
  const tsx = pathToFileURL(createRequire(caller).resolve('tsx/esm/api').replace(/\.cjs$/, '.mjs')).href;
  return `const { register } = await import(${JSON.stringify(tsx)}); register(); await import(${JSON.stringify(url)});`;
}

/**
 * Heap limits for the threads that move a batch's data (the task runner, the embedded database): a young
 * generation of 96 MB (a worker's default is 48 MB) lets the short-lived rows, vectors and messages of a write
 * die young instead of being copied by frequent scavenges. On 10,000-text batches (scripts/bench/ingest.ts):
 * 10 % less CPU in the process (4 pairs), faster in 5 of 6 pairs (mean +9 %). Space is committed only as a
 * thread uses it.
 */
export const DATA_THREAD_LIMITS = { maxYoungGenerationSizeMb: 96 } as const;
