import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The project folder (where package.json and generated/ live), found from this file, so the same code
 * runs from the TypeScript sources (tsx) and from a `npm run build` output in dist/.
 */
export function projectRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('cannot find the project folder (no package.json above kernel/)');
    dir = parent;
  }
  return dir;
}
