/**
 * Headless Chromium (Debian's, never a Playwright download) driven by playwright-core, and the chat
 * webview served from a fake origin with its real HTML, CSP, script and stylesheet.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before } from 'node:test';
import { Browser, chromium, Page } from 'playwright-core';
import type { Envelope, ToHost, ToWebview } from '../../src/shared/messages';
import { chatHtml } from '../../src/webviewHtml';
import { EXT_ROOT } from './env';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'];

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

const ORIGIN = 'https://webview.test';

/** VS Code's Dark Modern colours, as VS Code sets them on a webview's <html>. */
export const DARK_THEME: Record<string, string> = {
  '--vscode-font-family': 'system-ui, "Segoe UI", Ubuntu, sans-serif',
  '--vscode-font-size': '13px',
  '--vscode-editor-font-family': '"DejaVu Sans Mono", monospace',
  '--vscode-editor-font-size': '13px',
  '--vscode-foreground': '#cccccc',
  '--vscode-descriptionForeground': '#9d9d9d',
  '--vscode-errorForeground': '#f85149',
  '--vscode-focusBorder': '#0078d4',
  '--vscode-panel-background': '#181818',
  '--vscode-panel-border': '#2b2b2b',
  '--vscode-editor-background': '#1f1f1f',
  '--vscode-editor-foreground': '#cccccc',
  '--vscode-editorWidget-background': '#202020',
  '--vscode-input-background': '#313131',
  '--vscode-input-foreground': '#cccccc',
  '--vscode-input-border': '#3c3c3c',
  '--vscode-input-placeholderForeground': '#989898',
  '--vscode-button-background': '#0078d4',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-hoverBackground': '#026ec1',
  '--vscode-button-secondaryBackground': '#313131',
  '--vscode-button-secondaryForeground': '#cccccc',
  '--vscode-button-secondaryHoverBackground': '#3c3c3c',
  '--vscode-badge-background': '#616161',
  '--vscode-badge-foreground': '#f8f8f8',
  '--vscode-textLink-foreground': '#4daafc',
  '--vscode-textPreformat-foreground': '#d0d0d0',
  '--vscode-textPreformat-background': '#3c3c3c',
  '--vscode-textCodeBlock-background': '#2b2b2b',
  '--vscode-textBlockQuote-background': '#2b2b2b',
  '--vscode-textBlockQuote-border': '#616161',
  '--vscode-progressBar-background': '#0078d4',
  '--vscode-charts-green': '#89d185',
  '--vscode-charts-blue': '#3794ff',
  '--vscode-charts-orange': '#d18616',
  '--vscode-editorSuggestWidget-background': '#202020',
  '--vscode-editorSuggestWidget-border': '#454545',
  '--vscode-editorSuggestWidget-selectedBackground': '#04395e',
  '--vscode-editorWarning-foreground': '#cca700',
  '--vscode-editorLineNumber-foreground': '#6e7681',
  '--vscode-diffEditor-insertedLineBackground': 'rgba(155, 185, 85, 0.2)',
  '--vscode-diffEditor-removedLineBackground': 'rgba(255, 0, 0, 0.2)',
  '--vscode-gitDecoration-addedResourceForeground': '#81b88b',
  '--vscode-gitDecoration-deletedResourceForeground': '#c74e39',
  '--vscode-inputValidation-errorBackground': '#5a1d1d',
};

/** VS Code's Light Modern colours (the same variables). */
export const LIGHT_THEME: Record<string, string> = {
  ...DARK_THEME,
  '--vscode-foreground': '#3b3b3b',
  '--vscode-descriptionForeground': '#3b3b3b',
  '--vscode-errorForeground': '#f85149',
  '--vscode-focusBorder': '#005fb8',
  '--vscode-panel-background': '#f8f8f8',
  '--vscode-panel-border': '#e5e5e5',
  '--vscode-editor-background': '#ffffff',
  '--vscode-editor-foreground': '#3b3b3b',
  '--vscode-editorWidget-background': '#f8f8f8',
  '--vscode-input-background': '#ffffff',
  '--vscode-input-foreground': '#3b3b3b',
  '--vscode-input-border': '#cecece',
  '--vscode-input-placeholderForeground': '#767676',
  '--vscode-button-background': '#005fb8',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-hoverBackground': '#0258a8',
  '--vscode-button-secondaryBackground': '#e5e5e5',
  '--vscode-button-secondaryForeground': '#3b3b3b',
  '--vscode-button-secondaryHoverBackground': '#cccccc',
  '--vscode-badge-background': '#cccccc',
  '--vscode-badge-foreground': '#3b3b3b',
  '--vscode-textLink-foreground': '#005fb8',
  '--vscode-textPreformat-foreground': '#3b3b3b',
  '--vscode-textPreformat-background': '#0000001f',
  '--vscode-textCodeBlock-background': '#f2f2f2',
  '--vscode-textBlockQuote-background': '#f2f2f2',
  '--vscode-textBlockQuote-border': '#e5e5e5',
  '--vscode-editorWarning-foreground': '#bf8803',
  '--vscode-editorLineNumber-foreground': '#6e7681',
  '--vscode-gitDecoration-addedResourceForeground': '#587c0c',
  '--vscode-gitDecoration-deletedResourceForeground': '#ad0707',
  '--vscode-inputValidation-errorBackground': '#f2dede',
};

/**
 * VS Code's Dark High Contrast colours for the variables chat.css and code.css use (the colour
 * registry's `hcDark` values; variables whose hcDark value is null, like button.background and
 * button.secondaryBackground, are not set by VS Code, so they are absent here too).
 */
export const HC_THEME: Record<string, string> = Object.fromEntries(Object.entries({
  ...DARK_THEME,
  '--vscode-foreground': '#ffffff',
  '--vscode-descriptionForeground': 'rgba(255, 255, 255, 0.7)',
  '--vscode-errorForeground': '#f48771',
  '--vscode-focusBorder': '#f38518',
  '--vscode-contrastBorder': '#6fc3df',
  '--vscode-panel-background': '#000000',
  '--vscode-panel-border': '#6fc3df',
  '--vscode-editor-background': '#000000',
  '--vscode-editor-foreground': '#ffffff',
  '--vscode-editorWidget-background': '#0c141f',
  '--vscode-input-background': '#000000',
  '--vscode-input-foreground': '#ffffff',
  '--vscode-input-border': '#6fc3df',
  '--vscode-input-placeholderForeground': 'rgba(255, 255, 255, 0.7)',
  '--vscode-button-background': '',
  '--vscode-button-foreground': '#ffffff',
  '--vscode-button-border': '#6fc3df',
  '--vscode-button-hoverBackground': '',
  '--vscode-button-secondaryBackground': '',
  '--vscode-button-secondaryForeground': '#ffffff',
  '--vscode-button-secondaryHoverBackground': '',
  '--vscode-badge-background': '#000000',
  '--vscode-badge-foreground': '#ffffff',
  '--vscode-inputValidation-errorBackground': '#000000',
  '--vscode-textLink-foreground': '#21a6ff',
  '--vscode-textPreformat-foreground': '#ffffff',
  '--vscode-textPreformat-background': '#000000',
  '--vscode-textCodeBlock-background': '#000000',
  '--vscode-textBlockQuote-background': '#000000',
  '--vscode-textBlockQuote-border': '#ffffff',
  '--vscode-progressBar-background': '#6fc3df',
  '--vscode-editorWarning-foreground': '#ffd370',
  '--vscode-gitDecoration-addedResourceForeground': '#a1e3ad',
  '--vscode-gitDecoration-deletedResourceForeground': '#c74e39',
}).filter(([, v]) => v !== ''));

export const THEMES = { dark: DARK_THEME, light: LIGHT_THEME, 'high-contrast': HC_THEME } as const;
export type ThemeKind = keyof typeof THEMES;

/**
 * VS Code's default webview styles (the `defaultStyles` its webview host puts before an extension's
 * own), in the part that touches what the chat renders: `code` gets the preformat colour,
 * background, padding and radius everywhere, which a code block has to undo.
 */
export const VSCODE_DEFAULT_STYLES = `
body { background-color: transparent; color: var(--vscode-editor-foreground); font-family: var(--vscode-font-family);
  font-weight: var(--vscode-font-weight); font-size: var(--vscode-font-size); margin: 0; padding: 0 20px; }
img, video { max-width: 100%; max-height: 100%; }
a, a code { color: var(--vscode-textLink-foreground); }
a:hover { color: var(--vscode-textLink-activeForeground); }
code { font-family: var(--monaco-monospace-font); color: var(--vscode-textPreformat-foreground);
  background-color: var(--vscode-textPreformat-background); padding: 1px 3px; border-radius: 4px; }
blockquote { background: var(--vscode-textBlockQuote-background); border-color: var(--vscode-textBlockQuote-border); }
`;

export interface ChatPage {
  page: Page;
  /** Messages the webview posted to the (stub) host. */
  posted(): Promise<ToHost[]>;
  send(message: ToWebview): Promise<void>;
  /** Console errors, CSP violations, page errors and requests outside the webview's origin. */
  problems: string[];
}

export async function openChat(browser: Browser, width = 760, height = 900, theme: ThemeKind = 'dark'): Promise<ChatPage> {
  const page = await browser.newPage({ viewport: { width, height } });
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy|Refused to/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  const files: Record<string, [string, string]> = {
    '/out/webview.js': [join(EXT_ROOT, 'out', 'webview.js'), 'text/javascript'],
    '/media/chat.css': [join(EXT_ROOT, 'media', 'chat.css'), 'text/css'],
    '/media/code.css': [join(EXT_ROOT, 'media', 'code.css'), 'text/css'],
  };
  // VS Code's defaults come first, as in a real webview; a stylesheet from the webview's origin (CSP)
  const html = chatHtml({ cspSource: ORIGIN, scriptUri: `${ORIGIN}/out/webview.js`, styleUri: `${ORIGIN}/media/chat.css` })
    .replace('<link rel="stylesheet"', `<link rel="stylesheet" href="${ORIGIN}/vscode-default-styles.css">\n<link rel="stylesheet"`);
  await page.route('**/*', async (route) => {
    const url = new URL(route.request().url());
    if (url.origin !== ORIGIN) {
      problems.push(`remote request: ${url.href}`);
      return route.abort();
    }
    if (url.pathname === '/index.html') return route.fulfill({ body: html, contentType: 'text/html' });
    if (url.pathname === '/vscode-default-styles.css') return route.fulfill({ body: VSCODE_DEFAULT_STYLES, contentType: 'text/css' });
    const file = files[url.pathname];
    if (!file) {
      problems.push(`unknown resource: ${url.href}`);
      return route.fulfill({ status: 404, body: '' });
    }
    return route.fulfill({ body: readFileSync(file[0]), contentType: file[1] });
  });
  await page.addInitScript(([colours, kind]: [Record<string, string>, string]) => {
    const w = window as unknown as { __posted: unknown[]; acquireVsCodeApi: () => unknown };
    w.__posted = [];
    w.acquireVsCodeApi = () => ({
      postMessage: (m: unknown) => { w.__posted.push(m); },
      getState: () => undefined,
      setState: () => undefined,
    });
    document.addEventListener('DOMContentLoaded', () => {
      for (const [k, v] of Object.entries(colours)) document.documentElement.style.setProperty(k, v);
      document.body.classList.add(`vscode-${kind}`);
    });
  }, [THEMES[theme], theme] as [Record<string, string>, string]);
  await page.goto(`${ORIGIN}/index.html`);
  const posted = () => page.evaluate(() => (window as unknown as { __posted: ToHost[] }).__posted.slice());
  const chat: ChatPage = {
    page,
    posted,
    problems,
    // dispatched synchronously, as one 'message' event (what the host's postMessage delivers)
    send: (message: ToWebview) => page.evaluate((m: Envelope) => {
      window.dispatchEvent(new MessageEvent('message', { data: m }));
    }, message),
  };
  let ready = false;
  for (let i = 0; i < 200 && !ready; i++) {
    ready = (await posted()).some((m) => m.type === 'ready');
    if (!ready) await new Promise((r) => setTimeout(r, 25));
  }
  if (!ready) throw new Error(`the webview did not post ready; problems: ${problems.join('; ')}`);
  return chat;
}

export interface ChatOptions {
  width?: number;
  height?: number;
  theme?: ThemeKind;
  /** Post `daemon: ready` first, as the host does once the daemon is up (default true). */
  ready?: boolean;
}

/**
 * The set-up of a webview test file: one Chromium for the file, and `chat(options)` opening a fresh
 * chat page. After each test, every page it opened must have had no console errors, CSP violations
 * or remote requests; the pages are closed. Call once at a file's top level (it registers hooks).
 */
export function useChats(): (options?: ChatOptions) => Promise<ChatPage> {
  let browser: Browser | undefined;
  const pages: ChatPage[] = [];
  before(async () => {
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    const opened = pages.splice(0);
    for (const chat of opened) await chat.page.close();
    assert.deepEqual(opened.flatMap((c) => c.problems), [], 'no console errors, CSP violations or remote requests');
  });
  return async ({ width = 760, height = 900, theme = 'dark', ready = true }: ChatOptions = {}) => {
    if (!browser) throw new Error('useChats: chat() is for tests; the browser starts in before()');
    const c = await openChat(browser, width, height, theme);
    pages.push(c);
    if (ready) await c.send({ type: 'daemon', state: 'ready' });
    return c;
  };
}
