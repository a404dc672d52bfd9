/**
 * The page's script and stylesheet: files of this folder, read once, served by Tessera itself under names
 * that carry their content hash (`search-page.<hash>.js`), so browsers may cache them for good and a new
 * release is never mixed with an old cached file. Nothing is loaded from another origin.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';

export const ASSET_PREFIX = '/p/assets/';

export interface PageAsset {
  name: string;
  contentType: string;
  body: Buffer;
}

export interface PageAssets {
  script: PageAsset;
  style: PageAsset;
  byName: ReadonlyMap<string, PageAsset>;
}

async function load(file: string, extension: string, contentType: string): Promise<PageAsset> {
  const body = await readFile(new URL(`./assets/${file}`, import.meta.url));
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  return { name: `search-page.${hash}.${extension}`, contentType, body };
}

let loading: Promise<PageAssets> | undefined;

/** The assets, read on first use and kept (they are part of the release, not data). */
export function pageAssets(): Promise<PageAssets> {
  loading ??= (async () => {
    const [script, style] = await Promise.all([
      load('search-page.js', 'js', 'text/javascript; charset=utf-8'),
      load('search-page.css', 'css', 'text/css; charset=utf-8'),
    ]);
    return { script, style, byName: new Map([script, style].map((a) => [a.name, a])) };
  })();
  loading.catch(() => {
    loading = undefined;
  });
  return loading;
}
