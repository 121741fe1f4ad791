/**
 * Markdown for model text: markdown-it with raw HTML disabled (it is escaped), no images (nothing
 * remote may load), fenced code in a block with its language, highlight.js classes (common
 * languages, bundled) and Copy / Insert buttons the chat view handles by delegation.
 */

import hljs from 'highlight.js/lib/common';
import MarkdownIt from 'markdown-it';

/** The fence's language when highlight.js knows it (by name or alias), else null. */
function knownLanguage(lang: string): string | null {
  return lang && hljs.getLanguage(lang) ? lang : null;
}

function highlight(code: string, lang: string | null, escape: (s: string) => string): string {
  if (!lang) return escape(code); // no guessing: auto-detection is slow and flickers while text streams
  try {
    return hljs.highlight(code, { language: lang, ignoreIllegals: true }).value; // escapes the code itself
  } catch {
    return escape(code);
  }
}

const ACTIONS = '<div class="code-actions">'
  + '<button type="button" class="code-copy" title="Copy the code">Copy</button>'
  + '<button type="button" class="code-insert" title="Insert the code at the cursor in the active editor">Insert</button>'
  + '</div>';

export function createMarkdown(): MarkdownIt {
  const md = new MarkdownIt({ html: false, linkify: false, typographer: false, breaks: false });
  md.disable(['image']);
  const escape = md.utils.escapeHtml;
  md.renderer.rules.fence = (tokens, idx) => {
    const token = tokens[idx];
    const lang = (token.info.trim().split(/\s+/)[0] ?? '').replace(/[^\w+#.-]/g, '');
    const known = knownLanguage(lang);
    const label = `<div class="code-header"><span class="code-lang">${escape(lang)}</span>${ACTIONS}</div>`;
    const cls = lang ? ` class="${known ? 'hljs ' : ''}language-${escape(lang)}"` : '';
    return `<div class="code-block">${label}<pre><code${cls}>${highlight(token.content, known, escape)}</code></pre></div>\n`;
  };
  md.renderer.rules.code_block = (tokens, idx) =>
    `<div class="code-block"><div class="code-header"><span class="code-lang"></span>${ACTIONS}</div>`
    + `<pre><code>${escape(tokens[idx].content)}</code></pre></div>\n`;
  return md;
}

/** Markdown for the person's prompt: the same rules, but a single newline stays a line break. */
export function createPromptMarkdown(): MarkdownIt {
  const md = createMarkdown();
  md.set({ breaks: true });
  return md;
}
