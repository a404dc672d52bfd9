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
