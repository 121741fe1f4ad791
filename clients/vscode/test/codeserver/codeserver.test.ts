/**
 * The slow tier: the packaged .vsix in real VS Code (code-server 4.139.1 = VS Code 1.139.1), driven
 * by playwright-core + Debian's Chromium. Open the panel, send a prompt, look at the diff and answer
 * the permission modal, see the streamed answer, and check the edited file on disk.
 * `npm run test:codeserver` installs code-server into .cache/ first (minutes, once).
 */

import assert from 'node:assert/strict';
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { Browser, Frame, Page } from 'playwright-core';
import { launchChromium } from '../helpers/browser';
import { ARTIFACTS, DAEMON_COMMAND, EXT_ROOT, FakeLlm, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
});

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

/** The frame of our chat webview (VS Code nests it: webview iframe -> active-frame). */
async function chatFrame(page: Page): Promise<Frame> {
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
async function runCommand(page: Page, title: string): Promise<void> {
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

test('real VS Code: panel, prompt, diff + permission modal, streamed answer, edited file', { timeout: 25 * 60 * 1000 }, async () => {
  // ---- code-server (cached install) and the extension package --------------------------------
  const t0 = Date.now();
  const installed = execFileSync('bash', [join(EXT_ROOT, 'scripts', 'install-code-server.sh')], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 20 * 60 * 1000,
  }).trim().split('\n').pop()!;
  const [node, entry] = installed.split('\t');
  process.stdout.write(`# code-server ready in ${Math.round((Date.now() - t0) / 1000)}s (install or cache)\n`);
  const vsix = join(EXT_ROOT, 'toycoder.vsix');
  assert.ok(existsSync(vsix), 'npm run package made toycoder.vsix');

  // ---- a workspace, the scripted model, settings -------------------------------------------------
  const ws = makeWorkspace('toycoder-codeserver-');
  const llm: FakeLlm = await startFakeLlm(ws.dir, [
    { text: "I'll document `add` in `src/app.py`.\n", chunk_size: 4, chunk_delay: 0.01,
      tool_calls: [{ name: 'edit_file', arguments: { path: 'src/app.py', old_string: 'def add(a, b):\n', new_string: 'def add(a, b):\n    """Return the sum of a and b."""\n' } }] },
    { text: 'Done: **`add` now has a docstring**, and nothing else changed.', chunk_size: 3, chunk_delay: 0.02 },
  ]);
  cleanups.push(() => llm.stop());
  const config = writeConfig(ws, llm.baseUrl);
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
  cleanups.push(() => {
    try {
      process.kill(-server.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(() => server.exitCode === null || assert.fail(`code-server exited:\n${serverLog}`), 'code-server');
  for (let i = 0; i < 240 && !(await healthy(`${base}/healthz`)); i++) await new Promise((r) => setTimeout(r, 250));
  assert.ok(await healthy(`${base}/healthz`), `code-server is up\n${serverLog}`);

  // ---- the browser ---------------------------------------------------------------------------
  const browser: Browser = await launchChromium();
  cleanups.push(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  mkdirSync(ARTIFACTS, { recursive: true });
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, name) }).catch(() => undefined);
  try {
    await page.goto(`${base}/?folder=${encodeURIComponent(ws.root)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 90000 });
    await page.locator('.statusbar').waitFor({ timeout: 60000 });

    // open the panel from the command palette
    await runCommand(page, 'ToyCoder: Open Chat');
    const frame = await chatFrame(page);
    await frame.waitForSelector('#banner', { state: 'hidden', timeout: 60000 }); // the daemon is ready
    await frame.fill('#prompt', 'Add a docstring to add()');
    await frame.press('#prompt', 'Enter');

    // the permission modal: Show diff first, then Allow once
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.waitFor({ timeout: 60000 });
    assert.match((await dialog.textContent())!, /ToyCoder wants to run edit_file src\/app\.py/);
    await shot('code-server-permission.png');
    await dialog.getByRole('button', { name: 'Show diff' }).click();
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: 30000 });
    await page.locator('.tab', { hasText: 'proposed by ToyCoder' }).first().waitFor({ timeout: 30000 });
    await dialog.waitFor({ timeout: 30000 }); // asked again
    await page.waitForTimeout(500);
    await shot('code-server-diff.png');
    const diffText = (await page.locator('.monaco-diff-editor').first().textContent())!.replace(/\u00a0/g, ' ');
    assert.match(diffText, /def add\(a, b\): *return a \+ b.*def add\(a, b\): *"""Return the sum of a and b\."""/);
    await dialog.getByRole('button', { name: 'Allow once' }).click();

    // the streamed answer and the edited file
    await frame.waitForSelector('.assistant .markdown strong', { timeout: 60000 });
    await frame.waitForSelector('#stop', { state: 'hidden', timeout: 60000 });
    assert.equal(await frame.textContent('.assistant .markdown strong'), 'add now has a docstring');
    assert.equal(await frame.getAttribute('.tool-card', 'data-status'), 'completed');
    assert.equal(readFileSync(join(ws.root, 'src', 'app.py'), 'utf8'),
      'def add(a, b):\n    """Return the sum of a and b."""\n    return a + b\n');
    assert.match((await frame.textContent('.turn-footer'))!, /in · \d+ out tokens/);
    await shot('code-server-chat.png');
    assert.deepEqual(llm.violations(), []);
  } catch (e) {
    await shot('code-server-failure.png');
    process.stdout.write(`# code-server log:\n${serverLog.split('\n').slice(-40).map((l) => `# ${l}`).join('\n')}\n`);
    throw e;
  }
});
