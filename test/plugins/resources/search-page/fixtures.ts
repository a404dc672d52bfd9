/** Publications for the search page tests, served by an in-memory PublishedRetrievers directory. */
import { operationTable } from '../../../../generated/operations.js';
import { NotFoundError } from '../../../../kernel/errors.js';
import type { AnyHandler } from '../../../../kernel/http/handlers.js';
import { defineResource, type ResourcePlugin } from '../../../../kernel/plugins.js';
import type { DisplayConfig, PublishedRetrieverDirectory, PublishedRetrieverRecord } from '../../../../kernel/retrieval/published.js';
import { PublishedRetrievers } from '../../../../kernel/tokens.js';

/** A value of every DisplayConfig field. */
export const FULL_CONFIG: DisplayConfig = {
  title: 'Lamp Finder',
  description: 'Search every lamp we sell.',
  logo_url: '/static/logo.png',
  template_type: 'Catalog',
  exposed_fields: ['name', 'price', 'summary', 'image_url', 'link', 'rating'],
  field_mappings: { title: 'name', thumbnail: 'image_url', url: 'link', description: 'summary' },
  field_config: {
    price: { format: 'currency', format_options: { label: 'Price', prefix: '€', decimals: 2 } },
    summary: { format: 'text', format_options: { truncate_chars: 40 } },
    rating: { format: 'number', format_options: { label: 'Rating', decimals: 1 } },
  },
  inputs: [
    { field_name: 'color', input_type: 'select', label: 'Colour', order: 2, field_schema: { type: 'string', enum: ['red', 'blue'] }, placeholder: 'Any colour' },
    { field_name: 'query', input_type: 'text', label: 'What are you looking for?', order: 1, placeholder: 'e.g. brass desk lamp', required: true },
    { field_name: 'photo', input_type: 'image', label: 'Search by photo', order: 3 },
    { field_name: 'like', input_type: 'document', order: 4 },
  ],
  components: {
    show_hero: true,
    show_search: true,
    show_results_header: true,
    result_layout: 'grid',
    result_card: { card_click_action: 'open_url', field_order: ['price', 'rating'], layout: 'horizontal', show_find_similar: true, show_thumbnail: true },
  },
  layout: { mode: 'list', columns: 4, gap: 24 },
  theme: { primary_color: '#aa3300', font_family: 'Georgia, serif', border_radius: 12, card_style: 'outlined' },
  markdowns: [{ title: 'Shipping', content: 'Free **shipping** over €50. See [terms](/terms).' }],
  custom_cta: { label: 'Talk to us', markdown_content: 'Call *any time*.' },
  external_links: [{ name: 'Our shop', url: 'https://shop.example/lamps' }],
};

export function record(publicName: string, displayConfig: DisplayConfig, more: Partial<PublishedRetrieverRecord> = {}): PublishedRetrieverRecord {
  return {
    publicationId: `pub_${publicName}`,
    publicName,
    retrieverId: 'ret_x',
    organizationId: 'org_x',
    namespaceId: 'ns_x',
    title: displayConfig.title ?? publicName,
    description: displayConfig.description ?? null,
    displayConfig,
    passwordProtected: false,
    exposedFields: displayConfig.exposed_fields ?? [],
    marketplaceListed: false,
    active: true,
    rateLimits: { tier: 'free', per_minute: 60, per_hour: 1000, per_day: 10000, per_ip_per_minute: null, per_ip_per_hour: null },
    createdAt: new Date(0),
    updatedAt: new Date(0),
    ...more,
  };
}

/** A plugin that serves these records as the PublishedRetrievers directory (replacing the real one). */
export function fakeDirectory(records: readonly PublishedRetrieverRecord[], plugins: readonly unknown[]) {
  const byName = new Map(records.map((r) => [r.publicName, r]));
  const directory: PublishedRetrieverDirectory = {
    findByPublicName: async (name) => byName.get(name) ?? null,
    findByRetrieverId: async () => null,
    list: async () => ({ records: [...byName.values()], total: byName.size }),
    checkPassword: async () => false,
    publicApiKey: async () => 'prk_test',
  };
  return defineResource({
    name: 'test-published-directory',
    services: (container) => {
      if (container.isBound(PublishedRetrievers)) container.unbind(PublishedRetrievers);
      container.bind(PublishedRetrievers).toConstantValue(directory);
    },
    handlers: stubsFor(plugins),
  });
}

/** A 404 for every documented operation no plugin of `plugins` handles yet (so the kernel boots without them). */
function stubsFor(plugins: readonly unknown[]): Record<string, AnyHandler> {
  const handled = new Set(
    plugins.flatMap((p) => ((p as { kind?: string }).kind === 'resource' ? Object.keys((p as ResourcePlugin).handlers) : [])),
  );
  const stubs: Record<string, AnyHandler> = {};
  for (const operationId of Object.keys(operationTable)) {
    if (!handled.has(operationId)) stubs[operationId] = async () => { throw new NotFoundError('not built in this test'); };
  }
  return stubs;
}
