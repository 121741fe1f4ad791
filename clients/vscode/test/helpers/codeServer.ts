/**
 * Real VS Code for the slow tier: code-server (installed once into .cache/ by
 * scripts/install-code-server.sh) with the packaged .vsix, on a free loopback port with no extension
 * gallery, and Debian's Chromium on its workbench (playwright-core). What the code-server tests share:
 * start it, open the workbench, find the chat webview's frame, run a palette command.
 */

import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Browser, Frame, Page } from 'playwright-core';
import { launchChromium } from './browser';
import { ARTIFACTS, DAEMON_COMMAND, EXT_ROOT, TestWorkspace, waitFor } from './env';

export interface CodeServer {
  base: string;
  browser: Browser;
  page: Page;
  /** What code-server printed so far. */
  log(): string;
  /** A screenshot into tmp/artifacts (never fails the test). */
  shot(name: string): Promise<unknown>;
  /** Close the browser and end code-server's process group (its extension host and daemon with it). */
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function healthy(url: string): Promise<boolean> {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
  }
}

/**
 * code-server (cached install) serving `ws.root` with toycoder.vsix installed and the daemon
 * configured by `config`, and a Chromium page on its workbench, loaded. `name` keeps its user data
 * apart from another code-server of the same workspace.
 */
export async function startCodeServer(ws: TestWorkspace, config: string, name = 'cs'): Promise<CodeServer> {
  const t0 = Date.now();
  const installed = execFileSync('bash', [join(EXT_ROOT, 'scripts', 'install-code-server.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 20 * 60 * 1000,
  }).trim().split('\n').pop()!;
  const [node, entry] = installed.split('\t');
  process.stdout.write(`# code-server ready in ${Math.round((Date.now() - t0) / 1000)}s (install or cache)\n`);
  const vsix = join(EXT_ROOT, 'toycoder.vsix');
  assert.ok(existsSync(vsix), 'npm run package made toycoder.vsix');

  const userData = join(ws.dir, `${name}-user`);
  const extensions = join(ws.dir, `${name}-extensions`);
  mkdirSync(join(userData, 'User'), { recursive: true });
  writeFileSync(join(userData, 'User', 'settings.json'), JSON.stringify({
    'toycoder.daemon.command': DAEMON_COMMAND,
    'toycoder.configPath': config,
    'toycoder.logLevel': 'INFO',
    'workbench.startupEditor': 'none',
    'workbench.tips.enabled': false,
    'workbench.enableExperiments': false,
    'workbench.secondarySideBar.defaultVisibility': 'hidden',
    'chat.disableAIFeatures': true,
    'security.workspace.trust.enabled': false,
    'telemetry.telemetryLevel': 'off',
    'extensions.autoCheckUpdates': false,
    'extensions.autoUpdate': false,
    'update.mode': 'none',
    'files.autoSave': 'off',
  }, null, 2));
  const csConfig = join(ws.dir, `${name}-code-server.yaml`);
  writeFileSync(csConfig, 'auth: none\ncert: false\n');
  // no extension gallery: its queries go to a closed loopback port instead of the internet
  const gallery = 'http://127.0.0.1:9';
  const env: NodeJS.ProcessEnv = { ...ws.env, EXTENSIONS_GALLERY: JSON.stringify({
    serviceUrl: `${gallery}/gallery`, itemUrl: `${gallery}/items`, resourceUrlTemplate: `${gallery}/{publisher}/{name}/{version}/{path}`,
    controlUrl: '', recommendationsUrl: '' }) };
  const common = ['--config', csConfig, '--user-data-dir', userData, '--extensions-dir', extensions];
  const install = execFileSync(node, [entry, ...common, '--install-extension', vsix], { encoding: 'utf8', env, timeout: 120000 });
  assert.match(install, /toycoder.*(successfully installed|was successfully)/i, install);

  const port = await freePort();
  let serverLog = '';
  // its own process group: stop() ends it with its extension host and the daemon that started
  const server: ChildProcess = spawn(node, [entry, ...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none',
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
    ws.root], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  server.stdout!.on('data', (c) => { serverLog += c; });
  server.stderr!.on('data', (c) => { serverLog += c; });
  const killServer = () => {
    try {
      process.kill(-server.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  };
  const base = `http://127.0.0.1:${port}`;
  let browser: Browser | undefined;
  try {
    await waitFor(() => server.exitCode === null || assert.fail(`code-server exited:\n${serverLog}`), 'code-server');
    for (let i = 0; i < 240 && !(await healthy(`${base}/healthz`)); i++) await new Promise((r) => setTimeout(r, 250));
    assert.ok(await healthy(`${base}/healthz`), `code-server is up\n${serverLog}`);
    browser = await launchChromium();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.goto(`${base}/?folder=${encodeURIComponent(ws.root)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 90000 });
    await page.locator('.statusbar').waitFor({ timeout: 60000 });
    const opened = browser;
    return {
      base,
      browser: opened,
      page,
      log: () => serverLog,
      shot: (file: string) => page.screenshot({ path: join(ARTIFACTS, file) }).catch(() => undefined),
      stop: async () => {
        await opened.close().catch(() => undefined);
        killServer();
      },
    };
  } catch (e) {
    await browser?.close().catch(() => undefined);
    killServer();
    throw e;
  }
}

/** The frame of our chat webview (VS Code nests it: webview iframe -> active-frame). */
export async function chatFrame(page: Page): Promise<Frame> {
  for (let i = 0; i < 240; i++) {
    for (const frame of page.frames()) {
      if (frame === page.mainFrame()) continue;
      try {
        if (await frame.$('#prompt')) return frame;
      } catch {
        /* detached while we looked */
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error('the ToyCoder webview did not appear');
}

/** Open the quick input with `key`, type `text` and wait for a row with `row` in it; retried (the
 *  extensions may still be registering, the widget may still be settling), then Enter. */
async function quickPick(page: Page, key: string, text: string, row: string): Promise<void> {
  const input = page.locator('.quick-input-widget input');
  const match = page.locator('.quick-input-list .monaco-list-row', { hasText: row }).first();
  for (let attempt = 0; ; attempt++) {
    try {
      await page.keyboard.press(key);
      await input.waitFor({ state: 'visible', timeout: 15000 });
      await input.fill(text, { timeout: 5000 });
      await match.waitFor({ timeout: 3000 });
      break;
    } catch (e) {
      if (attempt >= 20) throw e;
      await page.keyboard.press('Escape');
      await page.waitForTimeout(1000);
    }
  }
  await page.keyboard.press('Enter');
}

/** Run a command from the palette. */
export async function runCommand(page: Page, title: string): Promise<void> {
  await quickPick(page, 'F1', `>${title}`, title);
}

/** Open `path` (relative to the workspace) in the editor with Quick Open; waits for its active tab. */
export async function openFile(page: Page, path: string): Promise<void> {
  const name = path.split('/').pop()!;
  await quickPick(page, 'Control+P', path, name);
  await page.locator('.tab.active', { hasText: name }).waitFor({ timeout: 30000 });
}

/** Monaco renders non-breaking spaces. */
export const plain = (text: string | null) => (text ?? '').replace(/\u00a0/g, ' ');
