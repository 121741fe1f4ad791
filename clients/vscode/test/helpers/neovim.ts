/**
 * A real headless Neovim with our plugin (clients/neovim), for tests where VS Code and Neovim share a
 * session: `nvim --headless --clean --listen <socket>` in its own process group, driven with
 * `nvim --server <socket> --remote-expr` (Lua in, JSON out) and `--remote-send` (keys). The plugin
 * starts its own daemon; only vim.notify and vim.ui.select are replaced (to record messages and to
 * answer pickers with nothing), as in tests/editors/neovim.
 */

import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DAEMON_COMMAND, PYTHON, REPO_ROOT, TestWorkspace, waitFor } from './env';

/** The venv's Neovim (the test extra installs it beside Python), else the one on PATH. */
export const NVIM = existsSync(join(dirname(PYTHON), 'nvim')) ? join(dirname(PYTHON), 'nvim') : 'nvim';

const HARNESS = `
local T = { notes = {} }
_G.T = T
vim.notify = function(msg, level)
  table.insert(T.notes, { msg = tostring(msg), level = level or vim.log.levels.INFO })
end
vim.ui.select = function(_, _, cb) vim.schedule(function() cb(nil, nil) end) end
function T.chat()
  if vim.fn.bufnr('^toycoder://chat$') < 0 then return '' end
  return table.concat(require('toycoder.chat').display_lines(), '\\n')
end
-- the permission window is focused with its keys armed: a key press decides
function T.review_armed()
  return vim.b[vim.api.nvim_get_current_buf()].toycoder_armed == true
end
`;

export class HeadlessNeovim {
  private constructor(private readonly proc: ChildProcess, private readonly socket: string, private readonly dir: string,
    readonly daemonLog: string) {}

  /** Neovim in `ws.root` with the plugin set up for the daemon config `config`. */
  static async start(ws: TestWorkspace, config: string): Promise<HeadlessNeovim> {
    const dir = mkdtempSync(join(tmpdir(), 'toycoder-nvim-')); // a short path: a socket's is limited
    const socket = join(dir, 'nvim.sock');
    const plugin = join(REPO_ROOT, 'clients', 'neovim');
    const proc = spawn(NVIM, ['--headless', '--clean', '-n', '-i', 'NONE', '--listen', socket, '--cmd', `set rtp^=${plugin}`],
      { cwd: ws.root, env: ws.env, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    const nvim = new HeadlessNeovim(proc, socket, dir, join(ws.dir, 'nvim-daemon.log'));
    await waitFor(() => existsSync(socket) || (proc.exitCode !== null && 'exited'), 'Neovim to listen', 30000);
    if (proc.exitCode !== null) throw new Error(`Neovim exited (${proc.exitCode})`);
    nvim.lua(HARNESS);
    nvim.lua("require('toycoder').setup(...)", { cmd: DAEMON_COMMAND, config, log_file: nvim.daemonLog,
      sync: { debounce_ms: 50 } });
    return nvim;
  }

  /** Run `code` (a Lua chunk; `...` are `args`) in Neovim and return what it returns (through JSON). */
  lua<T = unknown>(code: string, ...args: unknown[]): T {
    const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
    const chunk = 'vim.json.encode({ r = assert(loadstring(vim.base64.decode(_A[1])))'
      + '(unpack(vim.json.decode(vim.base64.decode(_A[2])))) })';
    const expr = `luaeval('${chunk.replace(/'/g, "''")}', ['${b64(code)}', '${b64(JSON.stringify(args))}'])`;
    const out = execFileSync(NVIM, ['--headless', '--clean', '--server', this.socket, '--remote-expr', expr],
      { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] });
    return (JSON.parse(out) as { r?: T }).r as T;
  }

  /** Type `keys` (Neovim's notation) as a person would. */
  keys(keys: string): void {
    execFileSync(NVIM, ['--headless', '--clean', '--server', this.socket, '--remote-send', keys],
      { timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] });
  }

  command(cmd: string): void {
    this.lua('vim.cmd(...)', cmd);
  }

  chat(): string {
    return this.lua<string>('return T.chat()');
  }

  busy(): boolean {
    return this.lua<boolean>("return require('toycoder').is_busy()");
  }

  statusline(): string {
    return this.lua<string>("return require('toycoder').statusline()");
  }

  notes(): string[] {
    return this.lua<Array<{ msg: string }>>('return T.notes').map((n) => n.msg);
  }

  /** The lines of the loaded buffer of `path`. */
  buffer(path: string): string[] {
    return this.lua<string[]>('return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)', path);
  }

  modified(path: string): boolean {
    return this.lua<boolean>('return vim.bo[vim.fn.bufnr(...)].modified', path);
  }

  /** Quit Neovim (its daemon ends with it); its process group is killed if it has not exited in time. */
  async stop(): Promise<void> {
    try {
      this.keys('<C-\\><C-n>:qa!<CR>');
      await waitFor(() => this.proc.exitCode !== null || this.proc.signalCode !== null, 'Neovim to quit', 10000);
    } catch {
      /* gone already, or stuck: killed below */
    }
    try {
      process.kill(-this.proc.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
