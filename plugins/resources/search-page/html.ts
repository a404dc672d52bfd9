/** Escaping for the two places page values land: HTML text/attributes, and JSON inside a script element. */

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Safe in element text and in quoted attribute values alike. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

/**
 * JSON for a `<script type="application/json">` element: `<` (so no `</script>` or `<!--` can end or
 * confuse the element), `>` and `&` become \u escapes, as do the line separators old parsers choke on.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

/**
 * A URL an owner configured (logo, external link, markdown link), kept only when it is http(s) or a path on
 * this site: never javascript:, data:, protocol-relative (`//host`) or backslash tricks browsers read as such.
 */
export function safeUrl(raw: string): string | null {
  const url = raw.trim();
  if (url.length === 0 || url.length > 2048) return null;
  // Control characters, spaces and backslashes change how browsers parse a scheme or host.
  if (/[\u0000-\u0020\u007f\\]/.test(url)) return null;
  if (/^https?:\/\/[^/?#]+/i.test(url)) return url;
  if (/^\/(?!\/)/.test(url) || /^(\.{1,2}\/|#|\?)/.test(url)) return url;
  return null;
}
