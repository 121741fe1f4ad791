/**
 * Test environment: where the repository and its Python venv are, temporary workspaces, the
 * daemon command and the scripted model server (toycoder_daemon.testing.fake_llm).
 */

import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';

function findExtensionRoot(): string {
  let dir = __dirname;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).name === 'toycoder') return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`no clients/vscode package.json above ${__dirname}`);
    dir = up;
  }
}

/** clients/vscode */
export const EXT_ROOT = findExtensionRoot();
/** The repository (two levels above clients/vscode). */
export const REPO_ROOT = process.env.TOYCODER_REPO_ROOT || resolve(EXT_ROOT, '..', '..');
/** The venv's Python, where toycoder_daemon is installed. */
export const PYTHON = process.env.TOYCODER_PYTHON || join(REPO_ROOT, '.venv', 'bin', 'python');
export const DAEMON_COMMAND = [PYTHON, '-P', '-m', 'toycoder_daemon']; // -P: never a workspace's own package
export const ARTIFACTS = process.env.TOYCODER_ARTIFACTS_DIR || join(EXT_ROOT, 'tmp', 'artifacts');

export interface TestWorkspace {
  dir: string;
  /** The project folder (README.md, src/app.py). */
  root: string;
  dataDir: string;
  /** Environment for the daemon: isolated data dir, no developer config or keys. */
  env: NodeJS.ProcessEnv;
}

export function makeWorkspace(prefix = 'toycoder-vscode-'): TestWorkspace {
  const base = process.env.TOYCODER_DATA_DIR ? dirname(process.env.TOYCODER_DATA_DIR) : tmpdir();
  mkdirSync(base, { recursive: true });
  const dir = mkdtempSync(join(base, prefix));
  const root = join(dir, 'ws');
  mkdirSync(join(root, 'src'), { recursive: true });
  writeFileSync(join(root, 'README.md'), '# Demo\nA tiny project.\n');
  writeFileSync(join(root, 'src', 'app.py'), 'def add(a, b):\n    return a + b\n');
  const dataDir = join(dir, 'data');
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, TOYCODER_DATA_DIR: dataDir, HOME: home, XDG_CONFIG_HOME: join(home, '.config') };
  for (const k of ['TOYCODER_CONFIG', 'OPENAI_API_KEY', 'OPENAI_BASE_URL']) delete env[k];
  return { dir, root, dataDir, env };
}

export function writeConfig(ws: TestWorkspace, baseUrl: string, extra = ''): string {
  const path = join(ws.dir, 'config.yaml');
  writeFileSync(path, 'providers:\n  openai:\n    api_keys: ["test-key-1"]\n'
    + `    base_url: ${baseUrl}\n    models: {default: fake-model, fast: fake-fast}\n`
    + 'default_provider: openai\n'
    + 'agent: {max_steps: 16, max_retries: 2, retry_interval: 0.05, auto_title: false}\n' + extra);
  return path;
}

export interface FakeLlm {
  baseUrl: string;
  /** What the server logged (one line per request; VIOLATION lines for failed `expect`s). */
  log(): string;
  violations(): string[];
  requestCount(): number;
  stop(): Promise<void>;
}

/** Start the scripted OpenAI-compatible server with these replies (see fake_llm.py's docstring). */
export async function startFakeLlm(dir: string, replies: unknown[]): Promise<FakeLlm> {
  const script = join(dir, `script-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(script, JSON.stringify({ replies }));
  const proc: ChildProcess = spawn(PYTHON, ['-m', 'toycoder_daemon.testing.fake_llm', '--script', script],
    { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (c: string) => { log += c; });
  const baseUrl = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`fake_llm did not start:\n${log}`)), 20000);
    proc.once('exit', (code) => reject(new Error(`fake_llm exited (${code}):\n${log}`)));
    createInterface({ input: proc.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolveUrl(line.trim());
    });
  });
  return {
    baseUrl,
    log: () => log,
    violations: () => log.split('\n').filter((l) => l.includes('VIOLATION')),
    requestCount: () => log.split('\n').filter((l) => /POST \S*chat\/completions/.test(l)).length,
    stop: async () => {
      if (proc.exitCode !== null) return;
      const gone = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await gone;
    },
  };
}

/** Poll until `check` is truthy (or fail with `what` after `timeoutMs`). */
export async function waitFor<T>(check: () => T | undefined | null | false, what: string, timeoutMs = 10000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
