/**
 * What the page shows, read from a publication's DisplayConfig. The publishing plugin validated it, but the
 * page trusts nothing it puts into HTML or CSS: every string is bounded, class names are reduced to
 * [a-z0-9-], colors and fonts must look like colors and font names, numbers are clamped, URLs must be
 * http(s) or same-site, and markdown is rendered by the safe subset renderer.
 */
import type { DisplayConfig, DisplayInput, PublishedRetrieverRecord } from '../../../kernel/retrieval/published.js';
import { safeUrl } from './html.js';
import { renderMarkdown } from './markdown.js';

export type PageInputType = 'text' | 'textarea' | 'number' | 'select' | 'image' | 'checkbox';

export interface PageInput {
  name: string;
  type: PageInputType;
  /** How the value is sent: numbers and booleans as JSON numbers and booleans. */
  valueType: 'string' | 'number' | 'integer' | 'boolean';
  label: string;
  placeholder: string;
  required: boolean;
  options: Array<{ value: string; label: string }>;
}

export interface PageFieldFormat {
  format: string;
  label: string | null;
  prefix: string;
  decimals: number | null;
  truncate: number | null;
}

export interface PageCard {
  clickAction: 'open_url' | 'expand' | 'find_similar' | 'none';
  fieldOrder: string[];
  layout: 'vertical' | 'horizontal';
  showFindSimilar: boolean;
  showThumbnail: boolean;
}

/** What the browser script needs (sent as JSON in the page). */
export interface PageClientConfig {
  publicName: string;
  passwordProtected: boolean;
  inputs: PageInput[];
  exposedFields: string[];
  fieldMappings: Record<string, string>;
  fieldConfig: Record<string, PageFieldFormat>;
  card: PageCard;
  layout: { mode: 'grid' | 'list'; columns: number; gap: number };
  theme: { primaryColor: string | null; fontFamily: string | null; borderRadius: number | null; cardStyle: string };
  showResultsHeader: boolean;
  /** The input that receives a document id for "find similar" (an input of type `document`), if any. */
  similarInput: string | null;
  pageSize: number;
}

export interface PageView {
  title: string;
  description: string | null;
  logoUrl: string | null;
  templateType: string;
  showHero: boolean;
  showSearch: boolean;
  markdowns: Array<{ title: string | null; html: string }>;
  cta: { label: string | null; html: string } | null;
  links: Array<{ name: string; url: string }>;
  client: PageClientConfig;
}

const MAX_TEXT = 2000;
const PAGE_SIZE = 20;

function text(value: unknown, max = MAX_TEXT): string | null {
  if (typeof value !== 'string') return null;
  const trimmed = value.trim();
  return trimmed.length > 0 ? trimmed.slice(0, max) : null;
}

function bool(value: unknown, fallback: boolean): boolean {
  return typeof value === 'boolean' ? value : fallback;
}

function clamp(value: unknown, min: number, max: number): number | null {
  if (typeof value !== 'number' || !Number.isFinite(value)) return null;
  return Math.min(max, Math.max(min, Math.round(value)));
}

/** A value safe inside a class attribute and a CSS selector. */
export function classToken(value: unknown, fallback: string): string {
  const token = typeof value === 'string' ? value.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 40) : '';
  return token || fallback;
}

const COLOR = /^(#(?:[0-9a-f]{3,4}|[0-9a-f]{6}|[0-9a-f]{8})|(?:rgb|rgba|hsl|hsla)\([0-9.,%\s/+-]{1,60}\)|[a-z]{3,30})$/i;
const FONT = /^[A-Za-z0-9 ,'"-]{1,200}$/;

export function safeColor(value: unknown): string | null {
  const color = text(value, 80);
  return color && COLOR.test(color) ? color : null;
}

export function safeFont(value: unknown): string | null {
  const font = text(value, 200);
  return font && FONT.test(font) ? font : null;
}

function inputType(input: DisplayInput): PageInputType | 'document' {
  const declared = (text(input.input_type, 40) ?? '').toLowerCase();
  const schemaType = typeof input.field_schema?.type === 'string' ? input.field_schema.type : '';
  if (['document', 'document_id', 'similar_document'].includes(declared)) return 'document';
  if (['image', 'image_upload', 'file', 'upload'].includes(declared)) return 'image';
  if (['select', 'dropdown', 'enum'].includes(declared)) return 'select';
  if (['textarea', 'long_text', 'multiline'].includes(declared)) return 'textarea';
  if (['number', 'integer', 'range', 'slider'].includes(declared)) return 'number';
  if (['checkbox', 'boolean', 'toggle'].includes(declared)) return 'checkbox';
  if (!declared && Array.isArray(input.field_schema?.enum)) return 'select';
  if (!declared && (schemaType === 'number' || schemaType === 'integer')) return 'number';
  if (!declared && schemaType === 'boolean') return 'checkbox';
  return 'text';
}

function optionsOf(schema: Record<string, unknown> | undefined): Array<{ value: string; label: string }> {
  const raw = Array.isArray(schema?.enum) ? schema.enum : Array.isArray(schema?.options) ? schema.options : [];
  const options: Array<{ value: string; label: string }> = [];
  for (const option of raw.slice(0, 200)) {
    if (typeof option === 'string' || typeof option === 'number') options.push({ value: String(option), label: String(option) });
    else if (option && typeof option === 'object') {
      const o = option as Record<string, unknown>;
      const value = typeof o.value === 'string' || typeof o.value === 'number' ? String(o.value) : null;
      if (value !== null) options.push({ value, label: text(o.label, 200) ?? value });
    }
  }
  return options;
}

function valueTypeOf(input: DisplayInput, type: PageInputType): PageInput['valueType'] {
  const schemaType = input.field_schema?.type;
  if (type === 'checkbox') return 'boolean';
  if (schemaType === 'integer') return 'integer';
  if (type === 'number' || schemaType === 'number') return 'number';
  return 'string';
}

function clickAction(value: unknown): PageCard['clickAction'] {
  const action = (text(value, 40) ?? '').toLowerCase();
  if (['open_url', 'open_link', 'link', 'url', 'navigate'].includes(action)) return 'open_url';
  if (['find_similar', 'similar'].includes(action)) return 'find_similar';
  if (['none', 'nothing'].includes(action)) return 'none';
  return 'expand';
}

function fieldNames(value: unknown, max = 100): string[] {
  if (!Array.isArray(value)) return [];
  return value.filter((f): f is string => typeof f === 'string' && f.length > 0 && f.length <= 200).slice(0, max);
}

/** The page of one publication. */
export function pageViewOf(record: PublishedRetrieverRecord): PageView {
  const config: DisplayConfig = record.displayConfig ?? {};
  const components = config.components ?? {};
  const card = components.result_card ?? {};

  const sorted = (config.inputs ?? [])
    .slice(0, 50)
    .map((input, index) => ({ input, index }))
    .filter(({ input }) => typeof input?.field_name === 'string' && /^[A-Za-z_][A-Za-z0-9_]{0,63}$/.test(input.field_name))
    // `order` first, the list's own order for ties and inputs without one.
    .sort((a, b) => (clamp(a.input.order, -1e6, 1e6) ?? 1e6) - (clamp(b.input.order, -1e6, 1e6) ?? 1e6) || a.index - b.index);
  let similarInput: string | null = null;
  const inputs: PageInput[] = [];
  for (const { input } of sorted) {
    const type = inputType(input);
    if (type === 'document') {
      similarInput ??= input.field_name;
      continue;
    }
    inputs.push({
      name: input.field_name,
      type,
      valueType: valueTypeOf(input, type),
      label: text(input.label, 200) ?? input.field_name,
      placeholder: text(input.placeholder, 200) ?? '',
      required: bool(input.required, false),
      options: type === 'select' ? optionsOf(input.field_schema) : [],
    });
  }
  // A publication without inputs still gets a search box (its text goes to the input `query`).
  if (inputs.length === 0) inputs.push({ name: 'query', type: 'text', valueType: 'string', label: 'Search', placeholder: '', required: false, options: [] });

  const fieldMappings: Record<string, string> = {};
  for (const [role, field] of Object.entries(config.field_mappings ?? {}).slice(0, 50)) {
    const name = text(field, 200);
    if (name && /^[A-Za-z0-9_-]{1,60}$/.test(role)) fieldMappings[role] = name;
  }
  const fieldConfig: Record<string, PageFieldFormat> = {};
  for (const [field, format] of Object.entries(config.field_config ?? {}).slice(0, 200)) {
    const options = format?.format_options ?? {};
    fieldConfig[field.slice(0, 200)] = {
      format: classToken(format?.format, 'text'),
      label: text(options.label, 200),
      prefix: text(options.prefix, 40) ?? '',
      decimals: clamp(options.decimals, 0, 10),
      truncate: clamp(options.truncate_chars, 1, 10_000),
    };
  }
  const mode = classToken(config.layout?.mode ?? components.result_layout, 'grid') === 'list' ? 'list' : 'grid';

  const markdowns = (config.markdowns ?? []).slice(0, 20).flatMap((m) =>
    typeof m?.content === 'string' ? [{ title: text(m.title, 200), html: renderMarkdown(m.content) }] : [],
  );
  const ctaContent = typeof config.custom_cta?.markdown_content === 'string' ? config.custom_cta.markdown_content : '';
  const ctaLabel = text(config.custom_cta?.label, 200);
  const links = (config.external_links ?? []).slice(0, 50).flatMap((l) => {
    const url = typeof l?.url === 'string' ? safeUrl(l.url) : null;
    const name = text(l?.name, 200);
    return url && name ? [{ name, url }] : [];
  });

  return {
    title: text(config.title, 300) ?? text(record.title, 300) ?? record.publicName,
    description: text(config.description) ?? text(record.description),
    logoUrl: typeof config.logo_url === 'string' ? safeUrl(config.logo_url) : null,
    templateType: classToken(config.template_type, 'default'),
    showHero: bool(components.show_hero, true),
    showSearch: bool(components.show_search, true),
    markdowns,
    cta: ctaLabel || ctaContent.trim() ? { label: ctaLabel, html: renderMarkdown(ctaContent) } : null,
    links,
    client: {
      publicName: record.publicName,
      passwordProtected: record.passwordProtected,
      inputs,
      exposedFields: fieldNames(record.exposedFields ?? config.exposed_fields, 500),
      fieldMappings,
      fieldConfig,
      card: {
        clickAction: clickAction(card.card_click_action),
        fieldOrder: fieldNames(card.field_order),
        layout: classToken(card.layout, 'vertical') === 'horizontal' ? 'horizontal' : 'vertical',
        showFindSimilar: bool(card.show_find_similar, false),
        showThumbnail: bool(card.show_thumbnail, true),
      },
      layout: { mode, columns: clamp(config.layout?.columns, 1, 6) ?? 3, gap: clamp(config.layout?.gap, 0, 96) ?? 16 },
      theme: {
        primaryColor: safeColor(config.theme?.primary_color),
        fontFamily: safeFont(config.theme?.font_family),
        borderRadius: clamp(config.theme?.border_radius, 0, 64),
        cardStyle: classToken(config.theme?.card_style, 'elevated'),
      },
      showResultsHeader: bool(components.show_results_header, true),
      similarInput,
      pageSize: PAGE_SIZE,
    },
  };
}
