/**
 * Markdown for model text: markdown-it with raw HTML disabled (it is escaped), no images (nothing
 * remote may load), fenced code in a styled block with its language.
 */

import MarkdownIt from 'markdown-it';

export function createMarkdown(): MarkdownIt {
  const md = new MarkdownIt({ html: false, linkify: false, typographer: false, breaks: false });
  md.disable(['image']);
  const escape = md.utils.escapeHtml;
  md.renderer.rules.fence = (tokens, idx) => {
    const token = tokens[idx];
    const lang = (token.info.trim().split(/\s+/)[0] ?? '').replace(/[^\w+#.-]/g, '');
    const label = lang ? `<div class="code-lang">${escape(lang)}</div>` : '';
    const cls = lang ? ` class="language-${escape(lang)}"` : '';
    return `<div class="code-block">${label}<pre><code${cls}>${escape(token.content)}</code></pre></div>\n`;
  };
  md.renderer.rules.code_block = (tokens, idx) =>
    `<div class="code-block"><pre><code>${escape(tokens[idx].content)}</code></pre></div>\n`;
  return md;
}
