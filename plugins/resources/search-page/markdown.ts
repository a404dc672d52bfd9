/**
 * A small, safe markdown subset for owner-written page text (markdowns, the custom CTA): paragraphs,
 * headings, lists, block quotes, fenced and inline code, **strong**, *emphasis*, links and rules. Nothing
 * the author writes reaches the page unescaped: there is no raw HTML, every text run goes through
 * escapeHtml, and a link keeps its href only when it is http(s) or a path on this site (safeUrl). Work is
 * linear in the input (capped at MAX_MARKDOWN_CHARS), so no text can stall the server.
 */
import { escapeHtml, safeUrl } from './html.js';

export const MAX_MARKDOWN_CHARS = 20_000;

const LINK = /\[([^\]\n]{1,500})\]\(([^()\s]{1,2048})\)/y;

/** Inline markup of one run of text. `closers` remembers delimiters with no closing one left (linear time). */
function inline(text: string, depth = 0): string {
  const exhausted = new Set<string>();
  const closing = (delimiter: string, from: number): number => {
    if (exhausted.has(delimiter)) return -1;
    const at = text.indexOf(delimiter, from);
    if (at < 0) exhausted.add(delimiter);
    return at;
  };
  let out = '';
  let i = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch === '`') {
      const end = closing('`', i + 1);
      if (end > i + 1) {
        out += `<code>${escapeHtml(text.slice(i + 1, end))}</code>`;
        i = end + 1;
        continue;
      }
    } else if (ch === '[' && depth < 3) {
      LINK.lastIndex = i;
      const m = LINK.exec(text);
      if (m) {
        const label = inline(m[1]!, depth + 1);
        const href = safeUrl(m[2]!);
        if (href) {
          const external = /^https?:/i.test(href);
          out += `<a href="${escapeHtml(href)}" rel="noopener noreferrer nofollow"${external ? ' target="_blank"' : ''}>${label}</a>`;
        } else {
          out += label;
        }
        i += m[0].length;
        continue;
      }
    } else if ((ch === '*' || (ch === '_' && !/[A-Za-z0-9]/.test(text[i - 1] ?? ''))) && depth < 3) {
      const double = text[i + 1] === ch;
      const delimiter = double ? ch + ch : ch;
      const end = closing(delimiter, i + delimiter.length);
      if (end > i + delimiter.length) {
        const tag = double ? 'strong' : 'em';
        out += `<${tag}>${inline(text.slice(i + delimiter.length, end), depth + 1)}</${tag}>`;
        i = end + delimiter.length;
        continue;
      }
      if (double) {
        out += escapeHtml(delimiter);
        i += 2;
        continue;
      }
    }
    out += escapeHtml(ch);
    i++;
  }
  return out;
}

type Block = { kind: 'p' | 'ul' | 'ol' | 'quote'; lines: string[] };

/** The markdown as HTML (a fragment: block elements only). Headings start at h3: the page owns h1 and h2. */
export function renderMarkdown(source: string): string {
  const text = source.slice(0, MAX_MARKDOWN_CHARS).replace(/\u0000/g, '').replace(/\r\n?/g, '\n');
  const lines = text.split('\n');
  const html: string[] = [];
  let open: Block | null = null;
  const flush = () => {
    if (!open) return;
    if (open.kind === 'p') html.push(`<p>${inline(open.lines.join(' '))}</p>`);
    else if (open.kind === 'quote') html.push(`<blockquote><p>${inline(open.lines.join(' '))}</p></blockquote>`);
    else html.push(`<${open.kind}>${open.lines.map((l) => `<li>${inline(l)}</li>`).join('')}</${open.kind}>`);
    open = null;
  };
  const add = (kind: Block['kind'], line: string) => {
    if (open?.kind !== kind) {
      flush();
      open = { kind, lines: [] };
    }
    open!.lines.push(line);
  };
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!;
    if (/^\s*```/.test(line)) {
      flush();
      const code: string[] = [];
      for (n++; n < lines.length && !/^\s*```/.test(lines[n]!); n++) code.push(lines[n]!);
      html.push(`<pre><code>${escapeHtml(code.join('\n'))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const level = Math.min(6, heading[1]!.length + 2);
      html.push(`<h${level}>${inline(heading[2]!.replace(/\s+#+\s*$/, ''))}</h${level}>`);
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      flush();
      html.push('<hr>');
      continue;
    }
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    if (bullet) {
      add('ul', bullet[1]!);
      continue;
    }
    const numbered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(line);
    if (numbered) {
      add('ol', numbered[1]!);
      continue;
    }
    const quote = /^\s*>\s?(.*)$/.exec(line);
    if (quote) {
      add('quote', quote[1]!);
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    add('p', line.trim());
  }
  flush();
  return html.join('\n');
}
