/**
 * The chat webview's HTML: a strict Content-Security-Policy (scripts only with the nonce, styles
 * and fonts only from the extension, nothing remote), one bundled script and one stylesheet.
 */

import { randomBytes } from 'node:crypto';

export interface WebviewHtmlOptions {
  /** `webview.cspSource`: the origin the webview may load the extension's files from. */
  cspSource: string;
  scriptUri: string;
  styleUri: string;
  nonce?: string;
}

export function makeNonce(): string {
  return randomBytes(18).toString('base64').replace(/[^A-Za-z0-9]/g, '');
}

function attr(value: string): string {
  return value.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    `style-src ${cspSource}`,
    `font-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    "connect-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join('; ');
}

export function chatHtml(options: WebviewHtmlOptions): string {
  const nonce = options.nonce ?? makeNonce();
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${attr(contentSecurityPolicy(options.cspSource, nonce))}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${attr(options.styleUri)}">
<title>ToyCoder</title>
</head>
<body>
<div id="app">
  <div id="header">
    <span id="header-title">New conversation</span>
    <button id="header-mode" type="button" title="Switch mode: what may run without asking">Mode</button>
  </div>
  <div id="banner" hidden></div>
  <details id="pinned-plan" open hidden></details>
  <div id="conversation" role="log" aria-live="polite">
    <div id="empty" class="empty">Ask ToyCoder about this workspace. Type <code>/</code> for commands.</div>
  </div>
  <div id="status" aria-live="polite"></div>
  <div id="composer">
    <ul id="completions" role="listbox" hidden></ul>
    <div id="chips" class="chips" hidden></div>
    <textarea id="prompt" rows="3" placeholder="Ask ToyCoder… (Enter to send, Shift+Enter for a new line, / for commands)" aria-label="Prompt"></textarea>
    <div id="actions">
      <span id="usage" title="Tokens used by the last turn"></span>
      <button id="send" type="button" title="Send (Enter)">Send</button>
      <button id="stop" type="button" title="Stop the running turn" hidden>Stop</button>
    </div>
  </div>
</div>
<script nonce="${nonce}" src="${attr(options.scriptUri)}"></script>
</body>
</html>
`;
}
