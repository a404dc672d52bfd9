/**
 * `allowed_origins`: exact origins (`https://app.example.com`) and wildcard-subdomain origins
 * (`https://*.example.com`, which matches any subdomain at any depth but not the bare domain).
 * Scheme and port must match exactly; host comparison is case-insensitive.
 */
interface ParsedOrigin {
  scheme: string;
  host: string;
  port: string;
}

function parse(origin: string): ParsedOrigin | undefined {
  const m = /^(https?):\/\/([^/:]+)(?::(\d{1,5}))?\/?$/i.exec(origin.trim());
  if (!m) return undefined;
  const scheme = m[1]!.toLowerCase();
  const defaultPort = scheme === 'https' ? '443' : '80';
  return { scheme, host: m[2]!.toLowerCase(), port: m[3] ?? defaultPort };
}

export function originMatches(pattern: string, origin: string): boolean {
  const p = parse(pattern);
  const o = parse(origin);
  if (!p || !o || p.scheme !== o.scheme || p.port !== o.port) return false;
  if (p.host.startsWith('*.')) {
    const base = p.host.slice(2);
    return o.host.endsWith(`.${base}`) && o.host.length > base.length + 1;
  }
  return p.host === o.host;
}

export function originAllowed(allowed: readonly string[], origin: string): boolean {
  return allowed.length === 0 || allowed.some((pattern) => originMatches(pattern, origin));
}

/**
 * True for an http(s) origin a browser sends for a web page. `null` (sandboxed frames, file: and data:
 * pages, redirects) is one value shared by every such page, so it is never granted anything.
 */
export function isWebOrigin(origin: string): boolean {
  return parse(origin) !== undefined;
}
