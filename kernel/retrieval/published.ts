/**
 * Published retrievers as the rest of the system sees them: a saved retriever exposed under a public name,
 * with how it renders (DisplayConfig, the contract's table), whether a password guards it, which result
 * fields leave the service, whether the marketplace lists it, and its rate limits. The published-retrievers
 * resource plugin owns the rows and binds `PublishedRetrievers`; other plugins (retriever keys, the
 * marketplace, the search page) read through this interface and never through that plugin's tables.
 */

/** `format_options` of one field (`field_config`). */
export interface DisplayFieldFormatOptions {
  label?: string;
  prefix?: string;
  decimals?: number;
  truncate_chars?: number;
}

export interface DisplayFieldConfig {
  format?: string;
  format_options?: DisplayFieldFormatOptions;
}

/** One search input of the page, in `order`. */
export interface DisplayInput {
  field_name: string;
  field_schema?: Record<string, unknown>;
  input_type?: string;
  label?: string;
  order?: number;
  placeholder?: string;
  required?: boolean;
}

export interface DisplayResultCard {
  card_click_action?: string;
  field_order?: string[];
  layout?: string;
  show_find_similar?: boolean;
  show_thumbnail?: boolean;
}

export interface DisplayComponents {
  show_hero?: boolean;
  show_search?: boolean;
  show_results_header?: boolean;
  result_layout?: string;
  result_card?: DisplayResultCard;
}

export interface DisplayLayout {
  mode?: 'grid' | 'list';
  columns?: number;
  gap?: number;
}

export interface DisplayTheme {
  primary_color?: string;
  font_family?: string;
  border_radius?: number;
  card_style?: string;
}

export interface DisplayMarkdown {
  title?: string;
  content: string;
}

export interface DisplayCustomCta {
  label?: string;
  markdown_content?: string;
}

export interface DisplayExternalLink {
  name: string;
  url: string;
}

/** How a published retriever renders; every field optional (the contract's DisplayConfig table). */
export interface DisplayConfig {
  title?: string;
  description?: string;
  logo_url?: string;
  template_type?: string;
  /** Only these result fields leave the service on public execution. */
  exposed_fields?: string[];
  /** Role (thumbnail, title, ...) → field name. */
  field_mappings?: Record<string, string>;
  field_config?: Record<string, DisplayFieldConfig>;
  inputs?: DisplayInput[];
  components?: DisplayComponents;
  layout?: DisplayLayout;
  theme?: DisplayTheme;
  markdowns?: DisplayMarkdown[];
  custom_cta?: DisplayCustomCta;
  external_links?: DisplayExternalLink[];
}

/** Named rate-limit tiers; `custom` when explicit numbers replaced a tier's. */
export type PublishedRateTier = 'free' | 'standard' | 'pro' | 'custom';

/** Public execution ceilings of one published retriever (all visitors together), and per visitor address. */
export interface PublishedRateLimits {
  tier: PublishedRateTier;
  per_minute: number;
  per_hour: number;
  per_day: number;
  /** Per visitor IP address per minute; null: no per-address limit. */
  per_ip_per_minute: number | null;
  /** Per visitor IP address per hour; null: no per-address limit. */
  per_ip_per_hour: number | null;
}

export interface PublishedRetrieverRecord {
  /** The published retriever's own id (`pub_`). Internal: never shown to public callers. */
  publicationId: string;
  /** URL slug: lower-case letters, digits and hyphens; unique across the whole service. */
  publicName: string;
  retrieverId: string;
  organizationId: string;
  /** Retrievers live in a namespace: public execution runs there. */
  namespaceId: string;
  title: string;
  description: string | null;
  displayConfig: DisplayConfig;
  passwordProtected: boolean;
  /** `display_config.exposed_fields` (empty: only `document_id` and `score` leave the service). */
  exposedFields: string[];
  marketplaceListed: boolean;
  /** Inactive (unpublished) retrievers answer no public request. */
  active: boolean;
  rateLimits: PublishedRateLimits;
  createdAt: Date;
  updatedAt: Date;
}

export interface PublishedRetrieverListQuery {
  /** Only active ones unless true. */
  includeInactive?: boolean;
  /** Only the marketplace-listed ones when true. */
  marketplaceListed?: boolean;
  offset: number;
  limit: number;
  /** Case-insensitive regex over titles and descriptions, already checked to be safe (linear time). */
  search?: string;
}

export interface PublishedRetrieverDirectory {
  /** The publication answering at this public name (active or not), or null. Always read fresh: unpublishing takes effect at once. */
  findByPublicName(publicName: string): Promise<PublishedRetrieverRecord | null>;
  /** The organization's publication of this retriever (by `ret_` id), or null. */
  findByRetrieverId(organizationId: string, retrieverId: string): Promise<PublishedRetrieverRecord | null>;
  /** Publications across organizations, newest first (the public list, the marketplace catalog). */
  list(query: PublishedRetrieverListQuery): Promise<{ records: PublishedRetrieverRecord[]; total: number }>;
  /** Whether `password` is the publication's password (slow salted hash, timing-safe compare). False when it has none. */
  checkPassword(publicationId: string, password: string): Promise<boolean>;
  /** The deprecated `prk_` key of the publication (returned by config and by a correct verify). */
  publicApiKey(publicationId: string): Promise<string>;
}
