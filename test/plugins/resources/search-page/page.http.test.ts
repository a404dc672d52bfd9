/**
 * GET /p/{public_name} over HTTP: the page of every DisplayConfig field, its security headers, the friendly
 * 404, the size budget, that nothing is loaded from another origin, and that hostile values in every string
 * field of the display config stay inert text.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DisplayConfig } from '../../../../kernel/retrieval/published.js';
import builtins from '../../../../plugins/index.js';
import { startTestKernel, type TestKernel } from '../../../support/kernel.js';
import { FULL_CONFIG, fakeDirectory, record } from './fixtures.js';

const HOSTILE = `"'><script>alert(1)</script><img src=x onerror=alert(2)></style></script><!--`;

/** Every string of the display config replaced by the hostile one (URLs by hostile URLs). */
function hostileConfig(): DisplayConfig {
  return {
    title: HOSTILE,
    description: HOSTILE,
    logo_url: 'javascript:alert(1)',
    template_type: HOSTILE,
    exposed_fields: [HOSTILE],
    field_mappings: { title: HOSTILE, [HOSTILE]: 'x' },
    field_config: { [HOSTILE]: { format: HOSTILE, format_options: { label: HOSTILE, prefix: HOSTILE, decimals: 2, truncate_chars: 5 } } },
    inputs: [
      { field_name: 'q', input_type: HOSTILE, label: HOSTILE, placeholder: HOSTILE, order: 1 },
      { field_name: 'choice', input_type: 'select', label: HOSTILE, placeholder: HOSTILE, field_schema: { enum: [HOSTILE], options: [{ value: HOSTILE, label: HOSTILE }] } },
      { field_name: HOSTILE, input_type: 'text', label: 'dropped: not an input name' },
    ],
    components: { result_layout: HOSTILE, result_card: { card_click_action: HOSTILE, field_order: [HOSTILE], layout: HOSTILE, show_find_similar: true } },
    layout: { mode: 'grid', columns: 99, gap: -5 },
    theme: { primary_color: 'red;background:url(https://evil.example/x)', font_family: 'x}</style><script>alert(1)</script>', border_radius: 1e9, card_style: HOSTILE },
    markdowns: [{ title: HOSTILE, content: `${HOSTILE}\n[x](javascript:alert(1)) [y](https://ok.example/"onclick="alert)` }],
    custom_cta: { label: HOSTILE, markdown_content: HOSTILE },
    external_links: [{ name: HOSTILE, url: 'javascript:alert(1)' }, { name: HOSTILE, url: `https://ok.example/"><script>alert(1)</script>` }],
  };
}

function configJson(html: string): Record<string, any> {
  const m = /<script type="application\/json" id="search-page-config">([^<]*)<\/script>/.exec(html);
  expect(m, 'the page carries its settings as JSON').not.toBeNull();
  return JSON.parse(m![1]!);
}

function assetsOf(html: string): string[] {
  return [...html.matchAll(/(?:src|href)="(\/p\/assets\/[^"]+)"/g)].map((m) => m[1]!);
}

describe('GET /p/{public_name}', () => {
  let t: TestKernel;

  beforeAll(async () => {
    t = await startTestKernel({
      plugins: [
        ...builtins,
        fakeDirectory([
          record('lamps', FULL_CONFIG),
          record('bare', {}),
          record('hostile', hostileConfig(), { title: HOSTILE, description: HOSTILE }),
          record('locked', { title: 'Members only' }, { passwordProtected: true }),
          record('gone', { title: 'Unpublished' }, { active: false }),
        ], builtins),
      ],
    });
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  const page = (name: string) => fetch(`${t.url}/p/${name}`);

  it('renders every DisplayConfig field', async () => {
    const res = await page('lamps');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await res.text();
    // Title, description, logo, template.
    expect(html).toContain('<title>Lamp Finder</title>');
    expect(html).toContain('<h1>Lamp Finder</h1>');
    expect(html).toContain('<p class="description">Search every lamp we sell.</p>');
    expect(html).toContain('<img class="logo" src="/static/logo.png" alt="Lamp Finder logo">');
    expect(html).toMatch(/<body class="[^"]*template-catalog/);
    // Theme and layout: classes in the page, values for the script (applied as CSS custom properties).
    expect(html).toMatch(/<body class="[^"]*layout-list[^"]*cards-outlined[^"]*card-horizontal/);
    const config = configJson(html);
    expect(config.theme).toEqual({ primaryColor: '#aa3300', fontFamily: 'Georgia, serif', borderRadius: 12, cardStyle: 'outlined' });
    expect(config.layout).toEqual({ mode: 'list', columns: 4, gap: 24 });
    // Inputs in their order, with labels, placeholders, options, the image upload; the document input is find-similar's.
    const order = ['What are you looking for?', 'Colour', 'Search by photo'].map((label) => html.indexOf(`>${label}`));
    expect(order.every((i) => i > 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(html).toContain('placeholder="e.g. brass desk lamp"');
    expect(html).toMatch(/<input type="search"[^>]*id="input-query"[^>]*required aria-required="true"/);
    expect(html).toContain('<option value="">Any colour</option><option value="red">red</option><option value="blue">blue</option>');
    expect(html).toMatch(/<input type="file" accept="image\/\*" id="input-photo"/);
    expect(html).not.toContain('id="input-like"');
    expect(config.similarInput).toBe('like');
    // Result cards: mappings, formats, card settings, exposed fields (rendered by the script).
    expect(config.fieldMappings).toEqual(FULL_CONFIG.field_mappings);
    expect(config.fieldConfig.price).toEqual({ format: 'currency', label: 'Price', prefix: '€', decimals: 2, truncate: null });
    expect(config.fieldConfig.summary).toMatchObject({ truncate: 40 });
    expect(config.card).toEqual({ clickAction: 'open_url', fieldOrder: ['price', 'rating'], layout: 'horizontal', showFindSimilar: true, showThumbnail: true });
    expect(config.exposedFields).toEqual(FULL_CONFIG.exposed_fields);
    expect(config.showResultsHeader).toBe(true);
    // Markdowns, call to action, external links.
    expect(html).toContain('<h2 id="markdown-0">Shipping</h2><p>Free <strong>shipping</strong> over €50. See <a href="/terms" rel="noopener noreferrer nofollow">terms</a>.</p>');
    expect(html).toContain('<aside class="cta" aria-label="Talk to us"><h2>Talk to us</h2><p>Call <em>any time</em>.</p></aside>');
    expect(html).toContain('<a href="https://shop.example/lamps" rel="noopener noreferrer nofollow" target="_blank">Our shop</a>');
    // Accessible markup: a search landmark, a live status for results, a skip link, a phone-width viewport.
    expect(html).toContain('role="search"');
    expect(html).toContain('id="results-status" class="status" role="status" aria-live="polite"');
    expect(html).toContain('<a class="skip-link" href="#main">');
    expect(html).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(html).toContain('<div id="results-empty" class="empty" hidden>');
    expect(html).toContain('<div id="results-error" class="error" role="alert" hidden>');
  });

  it('sends a strict Content-Security-Policy and no inline script', async () => {
    const res = await page('lamps');
    const policy = res.headers.get('content-security-policy')!;
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("default-src 'none'");
    expect(policy).toContain("connect-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    expect(policy).not.toContain('unsafe-eval');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const html = await res.text();
    for (const tag of html.match(/<script\b[^>]*>/g)!) expect(tag).toMatch(/^<script (type="application\/json" id="search-page-config"|src="\/p\/assets\/search-page\.[0-9a-f]{12}\.js" defer)>$/);
    expect(html).not.toMatch(/<style\b|\sstyle=/);
  });

  it('loads under 100 KB in all, and nothing from another origin', async () => {
    const res = await page('bare');
    const html = await res.text();
    let total = Buffer.byteLength(html);
    const assets = assetsOf(html);
    expect(assets).toHaveLength(2);
    for (const asset of assets) {
      const file = await fetch(`${t.url}${asset}`);
      expect(file.status).toBe(200);
      expect(file.headers.get('content-type')).toMatch(asset.endsWith('.js') ? /^text\/javascript/ : /^text\/css/);
      expect(file.headers.get('cache-control')).toContain('immutable');
      const text = await file.text();
      total += Buffer.byteLength(text);
      // No absolute URL, protocol-relative import or font of another origin in the script or stylesheet.
      expect(text).not.toMatch(/https?:\/\/[a-z0-9]/i);
      if (asset.endsWith('.css')) expect(text).not.toMatch(/@import|@font-face|url\(/i);
      else expect(text).not.toMatch(/\bimport\s*\(|importScripts|new WebSocket|EventSource/);
    }
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/(src|href)="\/\//);
    expect(total).toBeLessThan(100 * 1024);
  });

  it('answers an unknown, unpublished or impossible name with a friendly 404 page', async () => {
    for (const name of ['nobody-here', 'gone', 'UPPER', 'a%20b', '%3Cscript%3E', 'x'.repeat(150)]) {
      const res = await page(name);
      expect(res.status, name).toBe(404);
      expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
      expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
      const html = await res.text();
      expect(html).toContain('<h1>Search page not found</h1>');
      expect(html).not.toContain('script');
    }
    const tooLong = await page('x'.repeat(201));
    expect(tooLong.status).toBe(422);
    const asset = await fetch(`${t.url}/p/assets/search-page.000000000000.js`);
    expect(asset.status).toBe(404);
    expect(((await asset.json()) as { error: { type: string } }).error.type).toBe('NotFoundError');
  });

  it('shows a password prompt, not the search, when the retriever is protected', async () => {
    const html = await (await page('locked')).text();
    expect(html).toContain('<form id="password-form"');
    expect(html).toMatch(/<label for="password-input">Password<\/label><input type="password" id="password-input"/);
    expect(html).toMatch(/<form id="search-form"[^>]* hidden>/);
    expect(configJson(html).passwordProtected).toBe(true);
  });

  it('keeps hostile values in every string field inert', async () => {
    const res = await page('hostile');
    expect(res.status).toBe(200);
    const html = await res.text();
    // The only elements are the page's own: no script, image, style or handler attribute from the config.
    for (const tag of html.match(/<script\b[^>]*>/g)!) expect(tag).toMatch(/^<script (type="application\/json" id="search-page-config"|src="\/p\/assets\/[^"]+" defer)>$/);
    expect(html.match(/<script\b/g)).toHaveLength(2);
    const tags = html.match(/<[^>]*>/g)!;
    for (const tag of tags) {
      // Attribute names only (values are quoted, and a quote inside a value is always escaped).
      expect(tag.replace(/"[^"]*"/g, '""')).not.toMatch(/\son[a-z]+=/i);
      expect(tag).not.toMatch(/(href|src)="\s*javascript:/i);
      expect(tag).not.toMatch(/^<(img|style|iframe|object|svg)\b/i);
    }
    expect(html.match(/<img\b/g)).toBeNull();
    expect(html).not.toMatch(/<style|<!--/);
    expect(html).not.toContain('evil.example');
    // The JSON element cannot be closed early: it holds no '<' at all.
    const json = /<script type="application\/json" id="search-page-config">([\s\S]*?)<\/script>/.exec(html)![1]!;
    expect(json).not.toContain('<');
    const config = JSON.parse(json);
    expect(config.inputs.map((i: { name: string }) => i.name)).toEqual(['q', 'choice']);
    expect(config.theme).toEqual({ primaryColor: null, fontFamily: null, borderRadius: 64, cardStyle: expect.stringMatching(/^[a-z0-9-]+$/) });
    expect(config.layout).toEqual({ mode: 'grid', columns: 6, gap: 0 });
    expect(config.fieldMappings.title).toBe(HOSTILE);
    // The hostile text is there, as text.
    expect(html).toContain('&quot;&#39;&gt;&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(html).toContain('<a href="https://ok.example/&quot;onclick=&quot;alert" rel="noopener noreferrer nofollow" target="_blank">y</a>');
    expect(html).not.toContain('ok.example/"><script>');
  });
});
