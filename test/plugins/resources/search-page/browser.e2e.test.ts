/**
 * The search page end to end in a real browser: Debian's chromium driven by playwright-core opens
 * /p/{public_name} of a retriever published over real documents, types a query, sees formatted result
 * cards, clicks one, and the click (with its position and execution id, and the views before it) is in the
 * retriever's interactions. Also: the empty state, a password-protected page (wrong, then right password),
 * phone width without horizontal scrolling, and not one request to another origin. Screenshots are saved
 * under test-artifacts/.
 *
 * Without /usr/bin/chromium the suite is skipped with a message, unless TESSERA_REQUIRE_BROWSER=1 (CI), where
 * a missing browser fails it.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { Documents } from '../../../../plugins/resources/collections/index.js';
import { startTestKernel, type TestKernel, organizationMe } from '../../../support/kernel.js';

const CHROMIUM = '/usr/bin/chromium';
const REQUIRED = process.env.TESSERA_REQUIRE_BROWSER === '1';
const HAVE_BROWSER = existsSync(CHROMIUM);
const ARTIFACTS = path.resolve(__dirname, '../../../../test-artifacts');
const NS = 'shop';
const PASSWORD = 'lanterns after dark';

if (!HAVE_BROWSER && !REQUIRED) {
  console.warn(`search page browser test skipped: ${CHROMIUM} is missing (apt-get install chromium; TESSERA_REQUIRE_BROWSER=1 makes this a failure)`);
}

const LAMPS = [
  { name: 'Brass desk lamp', price: 40, rating: 4.64, summary: 'A brass desk lamp with a hinged arm and a warm bulb for late reading', color: '#c8a040' },
  { name: 'Brass floor lamp', price: 129.5, rating: 4.1, summary: 'Tall brass floor lamp', color: '#a07830' },
  { name: 'Paper lantern', price: 12, rating: 3.9, summary: 'Round paper lantern', color: '#f0e8d0' },
  { name: 'Steel pendant', price: 75, rating: 4.4, summary: 'Black steel pendant light', color: '#404048' },
];

const DISPLAY_CONFIG = {
  title: 'Lamp Finder',
  description: 'Every lamp we sell, searchable.',
  template_type: 'catalog',
  exposed_fields: ['name', 'price', 'rating', 'summary', 'image', 'sku'],
  field_mappings: { title: 'name', thumbnail: 'image', description: 'summary' },
  field_config: {
    price: { format: 'currency', format_options: { label: 'Price', prefix: '€', decimals: 2 } },
    rating: { format: 'number', format_options: { label: 'Rating', decimals: 1 } },
    summary: { format: 'text', format_options: { truncate_chars: 30 } },
  },
  inputs: [
    { field_name: 'query', input_type: 'text', label: 'What are you looking for?', placeholder: 'brass, lantern, steel…', order: 1, required: true },
    { field_name: 'like', input_type: 'document', order: 2 },
    { field_name: 'photo', input_type: 'image', label: 'Search by photo', order: 3 },
  ],
  components: {
    show_hero: true, show_search: true, show_results_header: true,
    result_card: { card_click_action: 'expand', field_order: ['price', 'rating'], show_thumbnail: true, show_find_similar: true },
  },
  layout: { mode: 'grid', columns: 3, gap: 20 },
  theme: { primary_color: '#8a3b12', font_family: 'Georgia, serif', border_radius: 10, card_style: 'elevated' },
  markdowns: [{ title: 'Delivery', content: 'Free **delivery** on orders over €50.' }],
  custom_cta: { label: 'Need help choosing?', markdown_content: 'Write to us: *we answer within a day*.' },
  external_links: [{ name: 'Our blog', url: 'https://blog.example/lamps' }],
};

describe.skipIf(!HAVE_BROWSER && !REQUIRED)('the search page in a browser', () => {
  let t: TestKernel;
  let browser: Browser;
  let retrieverId: string;

  const api = (method: string, p: string, body?: unknown) =>
    t.request(method, p, { key: t.adminKey, headers: { 'X-Namespace': NS }, ...(body !== undefined ? { body } : {}) });

  beforeAll(async () => {
    if (!HAVE_BROWSER) throw new Error(`${CHROMIUM} is missing and TESSERA_REQUIRE_BROWSER=1: install it (apt-get install chromium)`);
    await mkdir(ARTIFACTS, { recursive: true });
    t = await startTestKernel({ config: { runTasks: false } });
    const me = (await t.client().GET('/v1/me', {})).data!;
    await t.client().POST('/v1/namespaces', { body: { namespace_name: NS } });
    expect((await api('POST', '/v1/buckets', { bucket_name: 'catalog' })).status).toBe(201);
    const collection = (await api('POST', '/v1/collections/create', { collection_name: 'lamps', source: { type: 'bucket', bucket_id: 'catalog' } })).body;
    for (const [i, lamp] of LAMPS.entries()) {
      const png = await sharp({ create: { width: 160, height: 120, channels: 3, background: lamp.color } }).png().toBuffer();
      await t.kernel.services.get(Documents).upsert({
        organizationId: organizationMe(me).organization.organization_id, namespaceId: collection.namespace_id, collectionId: collection.collection_id,
        sourceKey: `lamp-${i}`, rootObjectId: `obj_lamp${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
        fields: { name: lamp.name, price: lamp.price, rating: lamp.rating, summary: lamp.summary, image: `data:image/png;base64,${png.toString('base64')}`, sku: `L-${i}`, search_text: lamp.name.toLowerCase() },
      });
    }
    // More than a page (20) of spare bulbs: "Show more results" runs a second execution.
    for (let i = 0; i < 22; i++) {
      await t.kernel.services.get(Documents).upsert({
        organizationId: organizationMe(me).organization.organization_id, namespaceId: collection.namespace_id, collectionId: collection.collection_id,
        sourceKey: `bulb-${i}`, rootObjectId: `obj_bulb${i}`, sourceCollectionId: null, sourceDocumentId: null, processingTier: 0,
        fields: { name: `Spare bulb ${i}`, price: 2 + i, rating: 4, summary: 'A spare bulb', sku: `B-${i}`, search_text: `spare bulb ${i}` },
      });
    }
    const retriever = (query: string) => ({
      collection_identifiers: ['lamps'],
      input_schema: { query: { type: 'string', required: true } },
      stages: [
        { stage_name: 'match', config: { stage_id: 'attribute_filter', parameters: { filters: { AND: [{ field: 'search_text', operator: 'contains', value: query }] } } } },
        { stage_name: 'order', config: { stage_id: 'sort_attribute', parameters: { field: 'price', direction: 'asc' } } },
      ],
    });
    const created = await api('POST', '/v1/retrievers', { retriever_name: 'lamp-search', ...retriever('{{inputs.query}}') });
    expect(created.status, created.text).toBe(201);
    retrieverId = created.body.retriever.retriever_id;
    expect((await api('POST', '/v1/retrievers', { retriever_name: 'members-search', ...retriever('{{inputs.query}}') })).status).toBe(201);
    const published = await api('POST', '/v1/retrievers/lamp-search/publish', { public_name: 'lamp-finder', display_config: DISPLAY_CONFIG });
    expect(published.status, published.text).toBe(201);
    const locked = await api('POST', '/v1/retrievers/members-search/publish', {
      public_name: 'members-lamps', display_config: { ...DISPLAY_CONFIG, title: 'Members only' }, password: PASSWORD,
    });
    expect(locked.status, locked.text).toBe(201);
    // Without a search form the page runs the retriever with no inputs at once: this one needs `query`, so it errs.
    expect((await api('POST', '/v1/retrievers', { retriever_name: 'browse-search', ...retriever('{{inputs.query}}') })).status).toBe(201);
    const browse = await api('POST', '/v1/retrievers/browse-search/publish', {
      public_name: 'browse-lamps', display_config: { ...DISPLAY_CONFIG, title: 'Browse', components: { show_search: false } },
    });
    expect(browse.status, browse.text).toBe(201);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  /** A page that records every request it makes and every console error or CSP violation. */
  async function open(publicName: string, viewport = { width: 1280, height: 900 }) {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    const requests: string[] = [];
    const problems: string[] = [];
    page.on('request', (r) => requests.push(r.url()));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(m.text());
    });
    page.on('pageerror', (err) => problems.push(err.message));
    const res = await page.goto(`${t.url}/p/${publicName}`);
    expect(res!.status()).toBe(200);
    return { page, requests, problems, close: () => context.close() };
  }

  async function search(page: Page, query: string) {
    await page.getByLabel('What are you looking for?').fill(query);
    await page.getByLabel('What are you looking for?').press('Enter');
  }

  it('searches, shows formatted cards, and records views and the click with position and execution id', async () => {
    const { page, requests, problems, close } = await open('lamp-finder');
    try {
      await expect.poll(() => page.title()).toBe('Lamp Finder');
      expect(await page.locator('h1').textContent()).toBe('Lamp Finder');
      // The theme reached the page (as CSS custom properties; no inline style is allowed).
      expect(await page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--primary').trim()")).toBe('#8a3b12');
      expect(await page.locator('.markdown strong').textContent()).toBe('delivery');

      const executed = page.waitForResponse((r) => r.url().endsWith('/v1/public/retrievers/lamp-finder/execute'));
      const viewed = page.waitForResponse((r) => r.url().endsWith('/interactions/batch'));
      await search(page, 'brass');
      const execution = await (await executed).json();
      expect((await viewed).status()).toBe(200);
      await expect.poll(() => page.locator('#results > li').count()).toBe(2);
      expect(await page.locator('#results-status').textContent()).toBe('2 results.');
      const first = page.locator('#results > li').first();
      expect(await first.locator('.card-title').textContent()).toBe('Brass desk lamp');
      expect(await first.locator('.card-description').textContent()).toBe('A brass desk lamp with a\u2026');
      expect(await first.locator('.card-body > .card-field').allTextContents()).toEqual(['Price: €40.00', 'Rating: 4.6']);
      expect(await first.locator('img.thumbnail').getAttribute('alt')).toBe('Brass desk lamp');
      await page.screenshot({ path: path.join(ARTIFACTS, 'search-page.png'), fullPage: true });

      const clickSent = page.waitForResponse((r) => r.url().endsWith('/v1/public/retrievers/lamp-finder/interactions'));
      await first.locator('.card-action').click();
      expect((await clickSent).status()).toBe(200);
      expect(await first.locator('.card-action').getAttribute('aria-expanded')).toBe('true');
      expect(await first.locator('.card-details').textContent()).toContain('L-0');

      // The owner's view: the execution is in the retriever's history, and the view and click interactions are stored.
      const history = await api('GET', `/v1/retrievers/${retrieverId}/executions`);
      expect(history.body.results.map((e: { execution_id: string }) => e.execution_id)).toContain(execution.execution_id);
      const rows = await t.kernel.services.get(DatabaseHandle).db('retriever_interactions').where({ retriever_id: retrieverId }).orderBy('created_at');
      const types = (r: { interaction_types: unknown }) => (typeof r.interaction_types === 'string' ? JSON.parse(r.interaction_types) : r.interaction_types) as string[];
      const clicks = rows.filter((r) => types(r).includes('CLICK'));
      const views = rows.filter((r) => types(r).includes('VIEW'));
      expect(clicks).toHaveLength(1);
      expect(clicks[0]).toMatchObject({ document_id: execution.documents[0].document_id, position: 0, execution_id: execution.execution_id, session_id: expect.stringMatching(/^sess_[0-9a-f]{32}$/) });
      expect(views.map((v) => v.position).sort()).toEqual([0, 1]);
      expect(views.every((v) => v.session_id === clicks[0].session_id && v.execution_id === execution.execution_id)).toBe(true);

      // "Find similar" runs the retriever again with the document in the input of type `document`.
      const similar = page.waitForRequest((r) => r.url().endsWith('/lamp-finder/execute') && r.postDataJSON()?.inputs?.like !== undefined);
      await first.getByRole('button', { name: 'Find results similar to Brass desk lamp' }).click();
      expect((await similar).postDataJSON().inputs).toEqual({ query: 'brass', like: execution.documents[0].document_id });

      // The empty state.
      await search(page, 'chandelier');
      await expect.poll(() => page.locator('#results-empty').isVisible()).toBe(true);
      expect(await page.locator('#results > li').count()).toBe(0);
      expect(await page.locator('#results-status').textContent()).toBe('No results.');

      // Nothing but this origin and data: URLs was ever requested; no script error, no CSP violation.
      expect(requests.filter((u) => !u.startsWith(t.url) && !u.startsWith('data:'))).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('records a click on a card of an earlier page with the execution that returned that card', async () => {
    const { page, problems, close } = await open('lamp-finder');
    try {
      const executed = page.waitForResponse((r) => r.url().endsWith('/lamp-finder/execute'));
      await search(page, 'spare');
      const firstPage = await (await executed).json();
      await expect.poll(() => page.locator('#results > li').count()).toBe(20);
      const secondRun = page.waitForResponse((r) => r.url().endsWith('/lamp-finder/execute'));
      const secondViews = page.waitForResponse((r) => r.url().endsWith('/interactions/batch') && r.request().postDataJSON()?.interactions?.[0]?.position === 20);
      await page.locator('#results-more').click();
      const secondPage = await (await secondRun).json();
      expect((await secondViews).status()).toBe(200);
      await expect.poll(() => page.locator('#results > li').count()).toBe(22);
      expect(secondPage.execution_id).not.toBe(firstPage.execution_id);

      const clickSent = page.waitForResponse((r) => r.url().endsWith('/lamp-finder/interactions'));
      await page.locator('#results > li').first().locator('.card-action').click();
      const click = await clickSent;
      expect(click.status()).toBe(200);
      expect(click.request().postDataJSON()).toMatchObject({ document_id: firstPage.documents[0].document_id, position: 0, execution_id: firstPage.execution_id });
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows the latest query when a new search starts while an earlier one is still running', async () => {
    const { page, problems, close } = await open('lamp-finder');
    try {
      // Hold the first search's request until the second has been answered and shown.
      let releaseFirst!: () => void;
      const firstHeld = new Promise<void>((resolve) => { releaseFirst = resolve; });
      let firstSeen!: () => void;
      const firstArrived = new Promise<void>((resolve) => { firstSeen = resolve; });
      await page.route('**/lamp-finder/execute', async (route) => {
        if (route.request().postDataJSON()?.inputs?.query === 'brass') {
          firstSeen();
          await firstHeld;
        }
        await route.continue().catch(() => { /* the page aborted the superseded request */ });
      });
      await search(page, 'brass');
      await firstArrived;
      await search(page, 'lantern');
      await expect.poll(() => page.locator('#results > li').count()).toBe(1);
      expect(await page.locator('.card-title').textContent()).toBe('Paper lantern');
      releaseFirst();
      // Whatever becomes of the superseded request, it never replaces the latest answer.
      await page.waitForTimeout(300);
      expect(await page.locator('.card-title').allTextContents()).toEqual(['Paper lantern']);
      expect(await page.locator('#results-status').textContent()).toBe('1 result.');
      expect(problems.filter((p) => !/abort/i.test(p))).toEqual([]);
    } finally {
      await close();
    }
  });

  it('asks for the password, refuses a wrong one, then searches with the right one', async () => {
    const { page, problems, close } = await open('members-lamps');
    try {
      expect(await page.locator('#search-form').isVisible()).toBe(false);
      await page.getByLabel('Password', { exact: true }).fill('not the password');
      await page.getByRole('button', { name: 'Unlock' }).click();
      await expect.poll(() => page.locator('#password-error').textContent()).toContain('not right');
      expect(await page.locator('#search-form').isVisible()).toBe(false);
      await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
      await page.getByRole('button', { name: 'Unlock' }).click();
      await expect.poll(() => page.locator('#search-form').isVisible()).toBe(true);
      await search(page, 'lantern');
      await expect.poll(() => page.locator('#results > li').count()).toBe(1);
      expect(await page.locator('.card-title').textContent()).toBe('Paper lantern');
      await page.screenshot({ path: path.join(ARTIFACTS, 'search-page-password.png'), fullPage: true });
      // The 401 of the wrong verify is not a page error; the console saw nothing else.
      expect(problems.filter((p) => !p.includes('401') && !p.includes('403'))).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows the error state when the search fails (here: a page without a search form whose retriever needs an input)', async () => {
    const { page, close } = await open('browse-lamps');
    try {
      expect(await page.locator('#search-form').isVisible()).toBe(false);
      await expect.poll(() => page.locator('#results-error').isVisible()).toBe(true);
      expect(await page.locator('#results-error').textContent()).toContain("input 'query' is required");
      expect(await page.locator('#results-error').getAttribute('role')).toBe('alert');
      expect(await page.locator('#results-status').textContent()).toBe('The search failed.');
    } finally {
      await close();
    }
  });

  it('sends an uploaded image as base64 in its input, with a preview', async () => {
    const { page, close } = await open('lamp-finder');
    try {
      const png = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ff0000' } }).png().toBuffer();
      await page.getByLabel('Search by photo').setInputFiles({ name: 'red.png', mimeType: 'image/png', buffer: png });
      await expect.poll(() => page.locator('.image-preview').isVisible()).toBe(true);
      expect(await page.locator('.image-preview').getAttribute('alt')).toBe('Chosen image: red.png');
      const sent = page.waitForRequest((r) => r.url().endsWith('/lamp-finder/execute'));
      await search(page, 'steel');
      expect((await sent).postDataJSON()).toEqual({
        inputs: { query: 'steel', photo: png.toString('base64') }, pagination: { method: 'offset', offset: 0 }, settings: { limit: 20 },
      });
      await expect.poll(() => page.locator('#results > li').count()).toBe(1);
    } finally {
      await close();
    }
  });

  it('fits a phone screen without horizontal scrolling', async () => {
    const { page, close } = await open('lamp-finder', { width: 375, height: 740 });
    try {
      await search(page, 'lamp');
      await expect.poll(() => page.locator('#results > li').count()).toBe(2);
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
      // Keyboard only: from the search box, Tab passes the photo upload and the button, then reaches the first card; Enter opens it.
      await page.getByLabel('What are you looking for?').focus();
      await page.keyboard.press('Tab');
      expect(await page.evaluate<string>('document.activeElement.id')).toBe('input-photo');
      await page.keyboard.press('Tab');
      expect(await page.evaluate<string>('document.activeElement.textContent')).toBe('Search');
      await page.keyboard.press('Tab');
      expect(await page.evaluate<string>('document.activeElement.textContent')).toBe('Brass desk lamp');
      await page.keyboard.press('Enter');
      expect(await page.locator('.card-action').first().getAttribute('aria-expanded')).toBe('true');
      const boxes = await page.locator('#results > li').evaluateAll((items) => items.map((i) => i.getBoundingClientRect().width));
      expect(boxes.every((w) => w > 300)).toBe(true);
      await page.screenshot({ path: path.join(ARTIFACTS, 'search-page-phone.png'), fullPage: true });
    } finally {
      await close();
    }
  });
});
