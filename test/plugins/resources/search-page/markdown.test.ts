/** The markdown subset of the search page: what it renders, and that nothing an author writes becomes markup or script. */
import { describe, expect, it } from 'vitest';
import { renderMarkdown } from '../../../../plugins/resources/search-page/markdown.js';
import { safeUrl } from '../../../../plugins/resources/search-page/html.js';

/** Every tag the renderer may produce, with the only attributes it may carry. */
const ALLOWED_TAG = /^<\/?(p|h[3-6]|ul|ol|li|blockquote|pre|code|strong|em|hr|a)( href="[^"<>]*" rel="noopener noreferrer nofollow"( target="_blank")?)?>$/;

function tagsOf(html: string): string[] {
  return html.match(/<[^>]*>/g) ?? [];
}

describe('renderMarkdown', () => {
  it('renders the subset: headings, paragraphs, lists, quotes, code, emphasis, links and rules', () => {
    const html = renderMarkdown([
      '# Title', '## Sub', 'Plain *em* and **strong** and `code` and _under_ snake_case_name.', '',
      '- one', '- [two](https://example.com/a?b=1&c=2)', '', '1. first', '2. second', '', '> quoted', '', '---', '',
      '```', '<b>raw</b>', '```', '[local](/docs) and [anchor](#top)',
    ].join('\n'));
    expect(html).toContain('<h3>Title</h3>');
    expect(html).toContain('<h4>Sub</h4>');
    expect(html).toContain('<p>Plain <em>em</em> and <strong>strong</strong> and <code>code</code> and <em>under</em> snake_case_name.</p>');
    expect(html).toContain('<ul><li>one</li><li><a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow" target="_blank">two</a></li></ul>');
    expect(html).toContain('<ol><li>first</li><li>second</li></ol>');
    expect(html).toContain('<blockquote><p>quoted</p></blockquote>');
    expect(html).toContain('<hr>');
    expect(html).toContain('<pre><code>&lt;b&gt;raw&lt;/b&gt;</code></pre>');
    expect(html).toContain('<a href="/docs" rel="noopener noreferrer nofollow">local</a>');
    expect(html).toContain('<a href="#top" rel="noopener noreferrer nofollow">anchor</a>');
  });

  const attacks = [
    '<script>alert(1)</script>',
    '<img src=x onerror=alert(1)>',
    '<a href="javascript:alert(1)">x</a>',
    '[click](javascript:alert(1))',
    '[click](JaVaScRiPt:alert(1))',
    '[click](java\tscript:alert(1))',
    '[click](data:text/html;base64,PHNjcmlwdD4=)',
    '[click](vbscript:msgbox)',
    '[click](//evil.example/x)',
    '[click](/\\evil.example)',
    '[click](&#106;avascript:alert(1))',
    '[x" onmouseover="alert(1)](https://ok.example)',
    '[x](https://ok.example/"onmouseover="alert(1))',
    "[x](https://ok.example/'onmouseover='alert(1))",
    '**<svg onload=alert(1)>**',
    '`</code><script>alert(1)</script>`',
    '# <iframe src=javascript:alert(1)>',
    '> <style>*{}</style>',
    '- <object data=x>',
    '```\n</code></pre><script>alert(1)</script>\n```',
    '<!-- comment --><![CDATA[x]]>',
  ];

  it.each(attacks)('leaves %j inert', (attack) => {
    const html = renderMarkdown(`before ${attack} after\n\n${attack}`);
    for (const tag of tagsOf(html)) expect(tag, html).toMatch(ALLOWED_TAG);
    expect(html).not.toMatch(/href="\s*(javascript|data|vbscript):/i);
    expect(html).not.toMatch(/href="\/\/|href="\/\\/);
    // No attribute besides the ones the renderer writes, whatever the author wrote.
    expect(html).not.toMatch(/<[^>]*\son[a-z]+=/i);
  });

  it('stays fast on pathological input', () => {
    const hostile = '**_*`['.repeat(4000) + '('.repeat(5000);
    const html = renderMarkdown(hostile);
    for (const tag of tagsOf(html)) expect(tag).toMatch(ALLOWED_TAG);
  });
});

describe('safeUrl', () => {
  it('keeps http(s) and same-site paths only', () => {
    expect(safeUrl('https://example.com/x')).toBe('https://example.com/x');
    expect(safeUrl(' http://example.com ')).toBe('http://example.com');
    expect(safeUrl('/p/other')).toBe('/p/other');
    expect(safeUrl('./x')).toBe('./x');
    for (const bad of ['javascript:alert(1)', 'data:image/png;base64,AAAA', '//evil.example', '/\\evil', 'https://', 'mailto:a@b', 'java script:x', 'https://a b', '']) {
      expect(safeUrl(bad), bad).toBeNull();
    }
  });
});
