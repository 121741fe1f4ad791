/**
 * Real VS Code for the slow tier: code-server (installed into .cache/ by scripts/install-code-server.sh,
 * minutes once) with the packaged .vsix, a workspace and our settings; driven by playwright-core in
 * Debian's Chromium. Shared by the test files of test/codeserver/.
 */

import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Frame, Page } from 'playwright-core';
import { launchChromium } from './browser';
import { ARTIFACTS, DAEMON_COMMAND, EXT_ROOT, TestWorkspace, waitFor } from './env';

export function freePort(): Promise<number> {
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

export interface CodeServer {
  /** http://127.0.0.1:<port> */
  base: string;
  log(): string;
  /** Ends code-server's process group. */
  stop(): void;
}

/** Install (or find cached) code-server, install the .vsix, start it on a free port for `ws`. */
export async function startCodeServer(ws: TestWorkspace, config: string): Promise<CodeServer> {
  const t0 = Date.now();
  const installed = execFileSync('bash', [join(EXT_ROOT, 'scripts', 'install-code-server.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 20 * 60 * 1000,
  }).trim().split('\n').pop()!;
  const [node, entry] = installed.split('\t');
  process.stdout.write(`# code-server ready in ${Math.round((Date.now() - t0) / 1000)}s (install or cache)\n`);
  const vsix = join(EXT_ROOT, 'toycoder.vsix');
  assert.ok(existsSync(vsix), 'npm run package made toycoder.vsix');

  const userData = join(ws.dir, 'cs-user');
  const extensions = join(ws.dir, 'cs-extensions');
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
  const csConfig = join(ws.dir, 'code-server.yaml');
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
  const server: ChildProcess = spawn(node, [entry, ...common, '--bind-addr', `127.0.0.1:${port}`, '--auth', 'none',
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override',
    ws.root], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  server.stdout!.on('data', (c) => { serverLog += c; });
  server.stderr!.on('data', (c) => { serverLog += c; });
  const stop = () => {
    try {
      process.kill(-server.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  };
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor(() => server.exitCode === null || assert.fail(`code-server exited:\n${serverLog}`), 'code-server');
    for (let i = 0; i < 240 && !(await healthy(`${base}/healthz`)); i++) await new Promise((r) => setTimeout(r, 250));
    assert.ok(await healthy(`${base}/healthz`), `code-server is up\n${serverLog}`);
  } catch (e) {
    stop();
    throw e;
  }
  return { base, log: () => serverLog, stop };
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

/** Run a command from the palette; retried while the extensions are still being registered. */
export async function runCommand(page: Page, title: string): Promise<void> {
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  for (let attempt = 0; ; attempt++) {
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible', timeout: 15000 });
    await input.fill(`>${title}`);
    try {
      await row.waitFor({ timeout: 3000 });
      break;
    } catch (e) {
      if (attempt >= 20) throw e;
      await page.keyboard.press('Escape');
      await page.waitForTimeout(1000);
    }
  }
  await page.keyboard.press('Enter');
}

/** Load the workbench on `ws.root` and open the chat; resolves with its frame once the daemon is ready. */
export async function openChat(page: Page, base: string, root: string): Promise<Frame> {
  await page.goto(`${base}/?folder=${encodeURIComponent(root)}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: 90000 });
  await page.locator('.statusbar').waitFor({ timeout: 60000 });
  await runCommand(page, 'ToyCoder: Open Chat');
  const frame = await chatFrame(page);
  await frame.waitForSelector('#banner', { state: 'hidden', timeout: 60000 }); // the daemon is ready
  return frame;
}

export interface Workbench {
  server: CodeServer;
  page: Page;
  /** A screenshot into the artifacts dir (never fails the test). */
  shot(name: string): Promise<unknown>;
}

/** code-server for `ws` with `config`, and a Chromium page for it; what to end goes into `cleanups`. */
export async function startWorkbench(ws: TestWorkspace, config: string,
  cleanups: Array<() => Promise<void> | void>): Promise<Workbench> {
  const server = await startCodeServer(ws, config);
  cleanups.push(() => server.stop());
  const browser = await launchChromium();
  cleanups.push(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  mkdirSync(ARTIFACTS, { recursive: true });
  return { server, page, shot: (name) => page.screenshot({ path: join(ARTIFACTS, name) }).catch(() => undefined) };
}
