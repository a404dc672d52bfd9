/**
 * The search page of a published retriever: GET /p/{public_name} (server-rendered HTML, with a strict
 * Content-Security-Policy) and GET /p/assets/{asset_name} (its script and stylesheet, served by Tessera).
 * Publications are read through the kernel's PublishedRetrievers directory (bound by the publishing
 * plugin), fresh on every request, so an unpublished name stops answering at once.
 */
import { Readable } from 'node:stream';
import { NotFoundError } from '../../../kernel/errors.js';
import { defineResource } from '../../../kernel/plugins.js';
import type { PublishedRetrieverRecord } from '../../../kernel/retrieval/published.js';
import { PublishedRetrievers } from '../../../kernel/tokens.js';
import { pageAssets } from './assets.js';
import { PAGE_HEADERS, renderNotFoundPage, renderSearchPage } from './render.js';
import { pageViewOf } from './view.js';

/** Public names are slugs; anything else cannot be one, so it is not looked up. */
const PUBLIC_NAME = /^[a-z0-9][a-z0-9-]{0,99}$/;

function html(status: 200 | 404, page: string) {
  return { status, body: undefined, headers: { ...PAGE_HEADERS }, stream: Readable.from([Buffer.from(page, 'utf8')]) };
}

export default defineResource({
  name: 'search-page',
  handlers: {
    getSearchPage: async ({ params, services }) => {
      const assets = await pageAssets();
      const directory = services.tryGet(PublishedRetrievers);
      let record: PublishedRetrieverRecord | null = null;
      if (directory && PUBLIC_NAME.test(params.public_name)) record = await directory.findByPublicName(params.public_name);
      if (!record || !record.active) return html(404, renderNotFoundPage(assets));
      return html(200, renderSearchPage(pageViewOf(record), assets));
    },
    getSearchPageAsset: async ({ params }) => {
      const asset = (await pageAssets()).byName.get(params.asset_name);
      if (!asset) throw new NotFoundError(`No search page file '${params.asset_name.slice(0, 100)}': reload the page for the current one`);
      return {
        status: 200,
        body: undefined,
        headers: { 'Content-Type': asset.contentType, 'Cache-Control': 'public, max-age=31536000, immutable' },
        stream: Readable.from([asset.body]),
      };
    },
  },
});
