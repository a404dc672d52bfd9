/**
 * The search page as server-rendered HTML: the shell (hero, inputs, markdowns, call to action, links,
 * password prompt, result region) is written here with every value escaped; the browser script
 * (assets/search-page.js) reads its settings from a JSON script element and fills the results. No inline
 * script or style: the Content-Security-Policy below forbids both.
 */
import { ASSET_PREFIX, type PageAssets } from './assets.js';
import { escapeHtml as e, jsonForScript } from './html.js';
import type { PageInput, PageView } from './view.js';

/**
 * Scripts and styles only from this origin, no inline ones; requests only to this origin. Images may come
 * from https origins too: result thumbnails can be presigned object-store URLs and owners' logos.
 */
export const PAGE_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob: https:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy': PAGE_POLICY,
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
};

function head(title: string, assets: PageAssets, extra = ''): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${e(title)}</title>
<link rel="icon" href="data:,">
${extra}<link rel="stylesheet" href="${ASSET_PREFIX}${assets.style.name}">
`;
}

function inputControl(input: PageInput): string {
  const id = `input-${input.name}`;
  const common = `id="${id}" name="${e(input.name)}" data-input="${e(input.name)}" data-value-type="${input.valueType}"${input.required ? ' required aria-required="true"' : ''}`;
  const placeholder = input.placeholder ? ` placeholder="${e(input.placeholder)}"` : '';
  const label = `<label for="${id}">${e(input.label)}${input.required ? ' <span class="required" aria-hidden="true">*</span>' : ''}</label>`;
  switch (input.type) {
    case 'textarea':
      return `<div class="field field-textarea">${label}<textarea ${common}${placeholder} rows="3"></textarea></div>`;
    case 'number':
      return `<div class="field field-number">${label}<input type="number" ${common}${placeholder} step="${input.valueType === 'integer' ? '1' : 'any'}"></div>`;
    case 'select': {
      const options = input.options.map((o) => `<option value="${e(o.value)}">${e(o.label)}</option>`).join('');
      const empty = `<option value="">${e(input.placeholder || 'Any')}</option>`;
      return `<div class="field field-select">${label}<select ${common}>${empty}${options}</select></div>`;
    }
    case 'image':
      return `<div class="field field-image">${label}<input type="file" accept="image/*" ${common} data-kind="image"><img class="image-preview" alt="" hidden></div>`;
    case 'checkbox':
      return `<div class="field field-checkbox"><input type="checkbox" ${common}>${label}</div>`;
    default:
      return `<div class="field field-text">${label}<input type="search" autocomplete="off" ${common}${placeholder}></div>`;
  }
}

export function renderSearchPage(view: PageView, assets: PageAssets): string {
  const c = view.client;
  const bodyClasses = [
    `template-${view.templateType}`,
    `layout-${c.layout.mode}`,
    `cards-${c.theme.cardStyle}`,
    `card-${c.card.layout}`,
    c.passwordProtected ? 'locked' : '',
  ].filter(Boolean).join(' ');
  const description = view.description ? `<meta name="description" content="${e(view.description)}">\n` : '';
  const logo = view.logoUrl ? `<img class="logo" src="${e(view.logoUrl)}" alt="${e(view.title)} logo">` : '';
  const hero = `<header class="hero${view.showHero ? '' : ' visually-hidden'}">
${logo}<h1>${e(view.title)}</h1>
${view.description ? `<p class="description">${e(view.description)}</p>` : ''}
</header>`;
  const password = c.passwordProtected
    ? `<section class="password-gate" id="password-gate" aria-labelledby="password-heading">
<h2 id="password-heading">This search is password protected</h2>
<form id="password-form" class="password-form" novalidate>
<div class="field"><label for="password-input">Password</label><input type="password" id="password-input" name="password" autocomplete="current-password" required aria-required="true" aria-describedby="password-error"></div>
<button type="submit">Unlock</button>
<p id="password-error" class="error" role="alert" hidden></p>
</form>
</section>`
    : '';
  // Without a search form (show_search false) the page lists what the retriever returns for no inputs.
  const search = `<form id="search-form" class="search" role="search" aria-label="${e(view.title)}" novalidate${view.showSearch ? '' : ' data-auto-search="true"'}${c.passwordProtected || !view.showSearch ? ' hidden' : ''}>
<div class="fields">
${c.inputs.map(inputControl).join('\n')}
</div>
<button type="submit" class="primary">Search</button>
</form>`;
  const results = `<section class="results-section" aria-labelledby="results-heading">
<h2 id="results-heading" class="${c.showResultsHeader ? 'results-header' : 'visually-hidden'}">Results</h2>
<p id="results-status" class="status" role="status" aria-live="polite" aria-atomic="true"></p>
<ol id="results" class="results" aria-labelledby="results-heading" aria-busy="false"></ol>
<div id="results-empty" class="empty" hidden><p>No results. Try other words or fewer filters.</p></div>
<div id="results-error" class="error" role="alert" hidden></div>
<button type="button" id="results-more" class="more" hidden>Show more results</button>
</section>`;
  const markdowns = view.markdowns.length
    ? `<div class="markdowns">${view.markdowns
        .map((m, i) => `<section class="markdown" aria-labelledby="markdown-${i}">${m.title ? `<h2 id="markdown-${i}">${e(m.title)}</h2>` : `<h2 id="markdown-${i}" class="visually-hidden">Information</h2>`}${m.html}</section>`)
        .join('\n')}</div>`
    : '';
  const cta = view.cta
    ? `<aside class="cta" aria-label="${e(view.cta.label ?? 'More')}">${view.cta.label ? `<h2>${e(view.cta.label)}</h2>` : ''}${view.cta.html}</aside>`
    : '';
  const links = view.links.length
    ? `<nav class="links" aria-label="Links"><ul>${view.links
        .map((l) => `<li><a href="${e(l.url)}" rel="noopener noreferrer nofollow"${/^https?:/i.test(l.url) ? ' target="_blank"' : ''}>${e(l.name)}</a></li>`)
        .join('')}</ul></nav>`
    : '';
  return `${head(view.title, { ...assets }, description)}<script type="application/json" id="search-page-config">${jsonForScript(c)}</script>
<script src="${ASSET_PREFIX}${assets.script.name}" defer></script>
</head>
<body class="${bodyClasses}">
<a class="skip-link" href="#main">Skip to search</a>
${hero}
<main id="main">
${password}
${search}
${results}
${markdowns}
${cta}
</main>
<footer class="footer">
${links}
<noscript><p>This search page needs JavaScript to search.</p></noscript>
</footer>
</body>
</html>
`;
}

/** The friendly answer to a public name that is unknown, unpublished or mistyped. */
export function renderNotFoundPage(assets: PageAssets): string {
  return `${head('Search page not found', assets)}</head>
<body class="not-found">
<main id="main">
<h1>Search page not found</h1>
<p>There is no published search at this address. Check the link you were given, or ask its owner whether it is still published.</p>
</main>
</body>
</html>
`;
}
