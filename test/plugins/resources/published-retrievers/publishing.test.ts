import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseHandle } from '../../../../kernel/tokens.js';
import { startPublishedFixture, type PublishedFixture } from './setup.js';

const FULL_DISPLAY = {
  title: 'Lamps', description: 'Every lamp we sell', logo_url: 'https://example.com/logo.png', template_type: 'gallery',
  exposed_fields: ['title', 'price'],
  field_mappings: { title: 'title', thumbnail: 'image' },
  field_config: { price: { format: 'currency', format_options: { label: 'Price', prefix: '$', decimals: 2, truncate_chars: 20 } } },
  inputs: [{ field_name: 'n', field_schema: { type: 'number' }, input_type: 'number', label: 'Max', order: 0, placeholder: '3', required: true }],
  components: {
    show_hero: true, show_search: true, show_results_header: true, result_layout: 'grid',
    result_card: { card_click_action: 'open', field_order: ['title', 'price'], layout: 'vertical', show_find_similar: true, show_thumbnail: true },
  },
  layout: { mode: 'grid', columns: 3, gap: 16 },
  theme: { primary_color: '#336699', font_family: 'Inter, sans-serif', border_radius: 8, card_style: 'elevated' },
  markdowns: [{ title: 'About', content: '**Bright** lamps' }],
  custom_cta: { label: 'Contact', markdown_content: '[Write to us](https://example.com)' },
  external_links: [{ name: 'Shop', url: 'https://example.com/shop' }],
};

describe('publishing a retriever', () => {
  let f: PublishedFixture;
  beforeAll(async () => {
    f = await startPublishedFixture();
    await f.retriever('lamps');
    await f.retriever('other');
  }, 120_000);
  afterAll(async () => {
    await f?.t.stop();
  });

  it('publishes with every display config field, a password hash, limits from a tier and a prk_ key', async () => {
    const r = await f.api('POST', '/v1/retrievers/lamps/publish', {
      public_name: 'lamp-shop', display_config: FULL_DISPLAY, password: 'correct horse', rate_limits: { tier: 'free', per_ip_per_minute: 5 }, marketplace_listed: true,
    });
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject({
      public_name: 'lamp-shop', title: 'Lamps', description: 'Every lamp we sell', password_protected: true, exposed_fields: ['title', 'price'],
      marketplace_listed: true, active: true, page_url: '/p/lamp-shop',
      rate_limits: { tier: 'free', per_minute: 30, per_hour: 500, per_day: 2000, per_ip_per_minute: 5, per_ip_per_hour: null },
    });
    expect(r.body.display_config).toEqual(FULL_DISPLAY);
    expect(r.body.public_api_key).toMatch(/^prk_[A-Za-z0-9]{40}$/);
    const stored = await f.t.kernel.services.get(DatabaseHandle).db('published_retrievers').where({ public_name: 'lamp-shop' }).first();
    expect(stored.password_hash).toMatch(/^scrypt\$16384\$8\$1\$/);
    expect(JSON.stringify(stored)).not.toContain('correct horse');
    expect(JSON.stringify(stored)).not.toContain(r.body.public_api_key);
    // The same key comes back on every read.
    expect((await f.api('GET', '/v1/retrievers/lamps/publish')).body.public_api_key).toBe(r.body.public_api_key);
  });

  it('refuses bad public names (422), reserved ones (422) and taken ones (409)', async () => {
    for (const name of ['ab', 'Lamp', 'lamp_shop', '-lamp', 'lamp-', 'a'.repeat(64), 'lamp shop']) {
      expect((await f.api('POST', '/v1/retrievers/other/publish', { public_name: name })).status, name).toBe(422);
    }
    expect((await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'execute' })).status).toBe(422);
    const taken = await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'lamp-shop' });
    expect(taken.status).toBe(409);
    expect(taken.body.error.message).toMatch(/taken/);
    const again = await f.api('POST', '/v1/retrievers/lamps/publish', { public_name: 'lamp-shop-2' });
    expect(again.status).toBe(409);
  });

  it('checks every display config field', async () => {
    const bad: Array<Record<string, unknown>> = [
      { unknown_field: 1 },
      { title: 5 }, { description: 'x'.repeat(2001) }, { logo_url: 'javascript:alert(1)' }, { template_type: '' },
      { exposed_fields: 'title' }, { exposed_fields: ['a', 'a'] }, { field_mappings: { title: 3 } },
      { field_config: { price: { format_options: { decimals: 11 } } } }, { field_config: { price: { format_options: { truncate_chars: 0 } } } },
      { field_config: { price: { format_options: { color: 'red' } } } },
      { inputs: [{ label: 'no field name' }] }, { inputs: [{ field_name: 'q', order: -1 }] },
      { components: { show_hero: 'yes' } }, { components: { result_card: { show_thumbnail: 1 } } },
      { layout: { mode: 'masonry' } }, { layout: { columns: 0 } }, { layout: { gap: -1 } },
      { theme: { primary_color: 'red; background:url(x)' } }, { theme: { font_family: 'x"><script>' } }, { theme: { border_radius: 101 } },
      { markdowns: [{ title: 'no content' }] }, { custom_cta: { label: 1 } }, { external_links: [{ name: 'x', url: 'javascript:alert(1)' }] },
    ];
    for (const display_config of bad) {
      const r = await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'other-shop', display_config });
      expect(r.status, JSON.stringify(display_config)).toBe(422);
    }
  });

  it('updates, lists and unpublishes', async () => {
    const published = await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'other-shop', rate_limits: { tier: 'pro', per_minute: 7 } });
    expect(published.status, published.text).toBe(201);
    expect(published.body.rate_limits).toMatchObject({ tier: 'custom', per_minute: 7, per_hour: 20000, per_day: 200000 });
    expect(published.body.title).toBe('other');
    expect((await f.api('PATCH', '/v1/retrievers/other/publish', {})).status).toBe(400);
    const patched = await f.api('PATCH', '/v1/retrievers/other/publish', { title: 'Other things', rate_limits: { tier: 'standard' }, marketplace_listed: true });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body).toMatchObject({ title: 'Other things', marketplace_listed: true, rate_limits: { tier: 'standard', per_minute: 120 } });
    const list = await f.t.request('GET', '/v1/published-retrievers?limit=1', { key: f.t.adminKey });
    expect(list.status, list.text).toBe(200);
    expect(list.body).toMatchObject({ total: 2, limit: 1, offset: 0, has_next: true });
    const gone = await f.api('DELETE', '/v1/retrievers/other/publish');
    expect(gone.body).toEqual({ retriever_id: expect.any(String), public_name: 'other-shop', unpublished: true });
    expect((await f.api('GET', '/v1/retrievers/other/publish')).status).toBe(404);
  });

  it('publishes with the retriever display config when the body gives none, and refuses one that is not valid', async () => {
    await f.api('PATCH', '/v1/retrievers/other', { display_config: { title: 'From the retriever', exposed_fields: ['title'] } });
    const r = await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'from-retriever' });
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject({ title: 'From the retriever', exposed_fields: ['title'] });
    await f.api('DELETE', '/v1/retrievers/other/publish');
    await f.api('PATCH', '/v1/retrievers/other', { display_config: { layout: { mode: 'spiral' } } });
    const refused = await f.api('POST', '/v1/retrievers/other/publish', { public_name: 'from-retriever' });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toMatch(/give a display_config/);
  });
});
