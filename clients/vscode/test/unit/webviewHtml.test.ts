import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chatHtml, contentSecurityPolicy, makeNonce } from '../../src/webviewHtml';

test('strict CSP: scripts only with the nonce, nothing remote, no inline styles', () => {
  const html = chatHtml({ cspSource: 'vscode-webview://abc', scriptUri: 'vscode-webview://abc/out/webview.js',
    styleUri: 'vscode-webview://abc/media/chat.css', nonce: 'N0nce' });
  const csp = /http-equiv="Content-Security-Policy" content="([^"]+)"/.exec(html)?.[1];
  assert.ok(csp, 'a CSP meta tag');
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'nonce-N0nce'(;|$)/);
  assert.match(csp, /style-src vscode-webview:\/\/abc(;|$)/);
  assert.doesNotMatch(csp, /unsafe-(inline|eval)/);
  assert.doesNotMatch(html, /https?:\/\//, 'no remote resource');
  const scripts = html.match(/<script[^>]*>/g) ?? [];
  assert.equal(scripts.length, 1);
  assert.match(scripts[0], /nonce="N0nce"/);
  assert.doesNotMatch(html, /style="/);
  assert.match(html, /id="prompt"/);
  assert.match(html, /id="stop"/);
});

test('nonces are fresh and plain', () => {
  const a = makeNonce();
  assert.match(a, /^[A-Za-z0-9]{16,}$/);
  assert.notEqual(a, makeNonce());
  assert.match(contentSecurityPolicy('x', a), new RegExp(`'nonce-${a}'`));
  assert.match(chatHtml({ cspSource: 'x', scriptUri: 's', styleUri: 'c' }), /nonce="[A-Za-z0-9]+"/);
});
