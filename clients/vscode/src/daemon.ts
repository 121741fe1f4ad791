/**
 * The daemon client: spawns `toycoder-daemon` and speaks LSP-framed JSON-RPC with it over stdio
 * (vscode-jsonrpc). No `vscode` import here, so Node tests drive it against the real daemon.
 */

import { ChildProcess, spawn } from 'node:child_process';
import { PassThrough } from 'node:stream';
import {
  CancellationToken,
  createMessageConnection,
  MessageConnection,
  ResponseError,
  StreamMessageReader,
  StreamMessageWriter,
} from 'vscode-jsonrpc/node';
import { pathToFileURL } from 'node:url';
import {
  AskUserParams,
  AskUserResult,
  CommandInfo,
  CommandList,
  DiagnosticsParams,
  DiagnosticsResult,
  ErrorCodes,
  MentionItem,
  Methods,
  PermissionParams,
  PermissionResult,
  PromptParams,
  PromptResult,
  PROTOCOL_VERSION,
  SessionInfo,
  SessionLoadResult,
  UpdateParams,
  WorkspaceTrustParams,
  WorkspaceTrustResult,
} from './shared/protocol';
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult, ProgressValue } from './shared/lsp';
import type { ModeInfo } from './sessionHeader';
import type { CheckpointDiff, CheckpointDiffParams, RestoreParams, RestoreResult } from './shared/checkpoints';

export interface DaemonOptions {
  /** The command and its arguments, e.g. ["toycoder-daemon"] or [python, "-P", "-m", "toycoder_daemon"]
   *  (never a bare `-m`: started in the workspace, it would run a `toycoder_daemon/` of the workspace). */
  command: string[];
  /** The workspace root (the daemon's root and working directory); undefined = none. */
  root?: string;
  /** `initializationOptions.configPath`. */
  configPath?: string;
  /** TOYCODER_LOG_LEVEL for the daemon (DEBUG, INFO, WARNING, ERROR). */
  logLevel?: string;
  env?: NodeJS.ProcessEnv;
  clientName?: string;
  clientVersion?: string;
}

export interface DaemonHandlers {
  update(params: UpdateParams): void;
  /** toycoder/commands/changed: the whole command list, sent when it changed (a custom command's file). */
  commandsChanged?(params: CommandList): void;
  requestPermission(params: PermissionParams, token: CancellationToken): Promise<PermissionResult>;
  askUser(params: AskUserParams, token: CancellationToken): Promise<AskUserResult>;
  /** toycoder/workspace/trust; given, the client declares `workspaceTrust`. */
  workspaceTrust?(params: WorkspaceTrustParams, token: CancellationToken): Promise<WorkspaceTrustResult>;
  progress?(token: string | number, value: ProgressValue): void;
  /** workspace/applyEdit; given, the client declares `workspace.applyEdit` and open files are edited here. */
  applyEdit?(params: ApplyWorkspaceEditParams): Promise<ApplyWorkspaceEditResult>;
  /** toycoder/diagnostics; given, the client declares `experimental.toycoder.diagnostics`. */
  diagnostics?(params: DiagnosticsParams, token: CancellationToken): Promise<DiagnosticsResult>;
  /** window/showMessage: 1 error, 2 warning, 3 info, 4 log. */
  showMessage?(type: number, message: string): void;
  /** A line the daemon wrote to stderr. */
  stderr?(line: string): void;
  /** The process is gone (after start succeeded). */
  exit?(code: number | null, signal: NodeJS.Signals | null): void;
}

export interface InitializeResult {
  capabilities: { experimental?: { toycoder?: { protocolVersion?: number; availableModes?: ModeInfo[] } } }
    & Record<string, unknown>;
  serverInfo?: { name: string; version?: string };
}

/**
 * The `initialize` capabilities. With an applyEdit handler: `workspace.applyEdit`, and
 * `workspaceEdit.documentChanges` so edits carry the document version they were made against
 * (applyEdit.ts refuses a mismatch).
 */
export function clientCapabilities(appliesEdits: boolean, reportsDiagnostics = false,
  answersTrust = false): Record<string, unknown> {
  return {
    experimental: { toycoder: { permissionRequest: true, askUser: true,
      ...(reportsDiagnostics ? { diagnostics: true } : {}), ...(answersTrust ? { workspaceTrust: true } : {}) } },
    window: { workDoneProgress: true },
    ...(appliesEdits ? { workspace: { applyEdit: true, workspaceEdit: { documentChanges: true } } } : {}),
    textDocument: { synchronization: { dynamicRegistration: false, didSave: false } },
  };
}

/** The daemon command could not be run because its executable does not exist (the panel offers to install it). */
export class DaemonNotFound extends Error {
  constructor(readonly exe: string) {
    super(`cannot start the ToyCoder daemon: "${exe}" was not found (install it, or set toycoder.daemon.command)`);
  }
}

/** What the person reads when the daemon speaks another protocol version than this extension. */
export function protocolMismatch(daemonVersion: number | undefined): string {
  return `the daemon speaks protocol version ${daemonVersion ?? '(none)'}, this extension ${PROTOCOL_VERSION}: `
    + 'they do not match, so some features may fail. Update the older one (pipx upgrade toycoder-daemon, '
    + 'or the extension).';
}

/** A JSON-RPC error from the daemon, with its code (see docs/protocol.md "Errors"). */
export class DaemonError extends Error {
  constructor(message: string, readonly code: number) {
    super(message);
    this.name = 'DaemonError';
  }
}

export class DaemonClient {
  readonly serverInfo: InitializeResult['serverInfo'];
  /** The permission modes the daemon offers (the mode picker's items). */
  readonly availableModes: ModeInfo[];
  private exited = false;
  private exitWaiters: Array<() => void> = [];

  private constructor(
    private readonly proc: ChildProcess,
    private readonly input: PassThrough,
    private readonly connection: MessageConnection,
    readonly initializeResult: InitializeResult,
  ) {
    this.serverInfo = initializeResult.serverInfo;
    this.availableModes = initializeResult.capabilities?.experimental?.toycoder?.availableModes ?? [];
  }

  /** Spawn the daemon, wire the handlers, run initialize/initialized. Rejects if it cannot start. */
  static async start(options: DaemonOptions, handlers: DaemonHandlers): Promise<DaemonClient> {
    if (!options.command.length) throw new Error('toycoder.daemon.command is empty');
    const [exe, ...args] = options.command;
    const env: NodeJS.ProcessEnv = { ...(options.env ?? process.env) };
    if (options.logLevel) env.TOYCODER_LOG_LEVEL = options.logLevel.toUpperCase();
    const proc = spawn(exe, args, { cwd: options.root, env, stdio: ['pipe', 'pipe', 'pipe'] });

    const spawned = new Promise<void>((resolve, reject) => {
      proc.once('spawn', () => resolve());
      proc.once('error', (err: NodeJS.ErrnoException) => {
        reject(err.code === 'ENOENT' ? new DaemonNotFound(exe)
          : new Error(`cannot start the ToyCoder daemon "${exe}": ${err.message}`));
      });
    });
    let stderrTail = '';
    let partial = '';
    proc.stderr!.setEncoding('utf8');
    proc.stderr!.on('data', (chunk: string) => {
      stderrTail = (stderrTail + chunk).slice(-4000);
      const lines = (partial + chunk).split(/\r?\n/);
      partial = lines.pop() ?? '';
      for (const line of lines) handlers.stderr?.(line);
    });
    // listen from the start: a daemon that dies at once must not be missed
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
      proc.once('exit', (code, signal) => resolve([code, signal])));
    const stderrClosed = new Promise<void>((resolve) => proc.stderr!.once('close', () => resolve()));
    await spawned;

    // Frames go through a PassThrough: a write to a daemon that just died fails in the pipe (ignored,
    // the exit is reported) instead of as an unhandled rejection inside vscode-jsonrpc.
    const input = new PassThrough();
    input.pipe(proc.stdin!);
    proc.stdin!.on('error', () => { /* EPIPE when the daemon died: the exit handler reports it */ });
    const connection = createMessageConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(input));
    connection.onNotification(Methods.update, (params: UpdateParams) => handlers.update(params));
    connection.onNotification(Methods.commandsChanged, (params: CommandList) => handlers.commandsChanged?.(params));
    connection.onRequest(Methods.requestPermission, async (params: PermissionParams, token) => {
      try {
        return await handlers.requestPermission(params, token);
      } catch {
        return { decision: 'reject' } satisfies PermissionResult;
      }
    });
    connection.onRequest(Methods.askUser, async (params: AskUserParams, token) => {
      try {
        return await handlers.askUser(params, token);
      } catch {
        return { cancelled: true } satisfies AskUserResult;
      }
    });
    connection.onRequest(Methods.workspaceTrust, async (params: WorkspaceTrustParams, token) => {
      try {
        return handlers.workspaceTrust ? await handlers.workspaceTrust(params, token) : { decision: 'deny' };
      } catch {
        return { decision: 'deny' } satisfies WorkspaceTrustResult;
      }
    });
    connection.onRequest('workspace/applyEdit', async (params: ApplyWorkspaceEditParams): Promise<ApplyWorkspaceEditResult> => {
      if (!handlers.applyEdit) return { applied: false, failureReason: 'this client does not apply edits' };
      try {
        return await handlers.applyEdit(params);
      } catch (e) {
        return { applied: false, failureReason: e instanceof Error ? e.message : String(e) };
      }
    });
    connection.onRequest(Methods.diagnostics, async (params: DiagnosticsParams, token): Promise<DiagnosticsResult> => {
      if (!handlers.diagnostics) return { items: [] };
      try {
        return await handlers.diagnostics(params, token);
      } catch {
        return { items: [] };
      }
    });
    connection.onRequest('window/workDoneProgress/create', () => null);
    connection.onNotification('$/progress', (p: { token: string | number; value: ProgressValue }) =>
      handlers.progress?.(p.token, p.value));
    connection.onNotification('window/showMessage', (p: { type: number; message: string }) =>
      handlers.showMessage?.(p.type, p.message));
    connection.onNotification('window/logMessage', (p: { type: number; message: string }) =>
      handlers.stderr?.(p.message));
    // Only sent to clients without our capabilities; answer "no" rather than hang.
    connection.onRequest('window/showMessageRequest', () => null);
    connection.listen();

    const exitedEarly = exited.then(async ([code, signal]): Promise<never> => {
      await Promise.race([stderrClosed, new Promise((r) => setTimeout(r, 500))]); // its last words
      const tail = stderrTail.trim().split('\n').slice(-5).join('\n');
      throw new Error(`the ToyCoder daemon exited during start (code ${code ?? signal})${tail ? `:\n${tail}` : ''}`);
    });
    exitedEarly.catch(() => undefined);

    const root = options.root;
    const init = connection.sendRequest<InitializeResult>('initialize', {
      processId: process.pid,
      clientInfo: { name: options.clientName ?? 'toycoder-vscode', version: options.clientVersion ?? '0' },
      rootUri: root ? pathToFileURL(root).href : null,
      rootPath: root ?? null,
      workspaceFolders: root ? [{ uri: pathToFileURL(root).href, name: root.split(/[\\/]/).pop() || root }] : null,
      initializationOptions: options.configPath ? { configPath: options.configPath } : {},
      capabilities: clientCapabilities(handlers.applyEdit !== undefined, handlers.diagnostics !== undefined,
        handlers.workspaceTrust !== undefined),
    });
    init.catch(() => undefined);
    let result: InitializeResult;
    try {
      result = await Promise.race([init, exitedEarly]);
    } catch (e) {
      // A write to a dead process fails first (EPIPE); the exit status and stderr say more.
      const why = await Promise.race([exitedEarly.catch((x: Error) => x), new Promise((r) => setTimeout(r, 1000, e))]);
      connection.dispose();
      proc.kill();
      throw why instanceof ResponseError ? new DaemonError(why.message, why.code) : why;
    }
    const version = result.capabilities?.experimental?.toycoder?.protocolVersion;
    if (version !== PROTOCOL_VERSION) {
      const said = protocolMismatch(version);
      handlers.stderr?.(`[toycoder-vscode] warning: ${said}`);
      handlers.showMessage?.(2, said);
    }
    await connection.sendNotification('initialized', {});
    const client = new DaemonClient(proc, input, connection, result);
    void exited.then(([code, signal]) => {
      client.exited = true;
      if (partial) handlers.stderr?.(partial);
      connection.dispose();
      for (const w of client.exitWaiters.splice(0)) w();
      handlers.exit?.(code, signal);
    });
    return client;
  }

  get running(): boolean {
    return !this.exited;
  }

  get pid(): number | undefined {
    return this.proc.pid;
  }

  private async request<R>(method: string, params: unknown): Promise<R> {
    if (this.exited) throw new DaemonError('the ToyCoder daemon is not running', -32099);
    try {
      return await this.connection.sendRequest<R>(method, params);
    } catch (e) {
      if (e instanceof ResponseError) throw new DaemonError(e.message, e.code);
      throw e;
    }
  }

  newSession(title?: string): Promise<SessionInfo> {
    return this.request(Methods.sessionNew, title ? { title } : {});
  }

  async listSessions(): Promise<SessionInfo[]> {
    return (await this.request<{ sessions: SessionInfo[] }>(Methods.sessionList, {})).sessions;
  }

  setMode(sessionId: string, mode: string): Promise<SessionInfo> {
    return this.request(Methods.sessionSetMode, { sessionId, mode });
  }

  loadSession(sessionId: string): Promise<SessionLoadResult> {
    return this.request(Methods.sessionLoad, { sessionId });
  }

  prompt(sessionId: string, text: string, context?: PromptParams['context']): Promise<PromptResult> {
    return this.request(Methods.prompt, context?.length ? { sessionId, text, context } : { sessionId, text });
  }

  async cancel(sessionId: string): Promise<boolean> {
    return (await this.request<{ cancelled: boolean }>(Methods.cancel, { sessionId })).cancelled;
  }

  async completeMentions(sessionId: string | undefined, prefix: string, limit = 50): Promise<MentionItem[]> {
    const params = sessionId ? { sessionId, prefix, limit } : { prefix, limit };
    return (await this.request<{ items: MentionItem[] }>(Methods.mentionsComplete, params)).items;
  }

  async listCommands(): Promise<CommandInfo[]> {
    return (await this.request<{ commands: CommandInfo[] }>(Methods.commandsList, {})).commands;
  }

  restoreCheckpoint(params: RestoreParams): Promise<RestoreResult> {
    return this.request(Methods.checkpointRestore, params);
  }

  checkpointDiff(params: CheckpointDiffParams): Promise<CheckpointDiff> {
    return this.request(Methods.checkpointDiff, params);
  }

  didOpen(uri: string, languageId: string, version: number, text: string): void {
    this.notify('textDocument/didOpen', { textDocument: { uri, languageId, version, text } });
  }

  didChange(uri: string, version: number, text: string): void {
    this.notify('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ text }] });
  }

  didClose(uri: string): void {
    this.notify('textDocument/didClose', { textDocument: { uri } });
  }

  private notify(method: string, params: unknown): void {
    if (this.exited) return;
    this.connection.sendNotification(method, params).catch(() => undefined);
  }

  /** Wait for the process to exit (resolves at once if it has). */
  waitForExit(): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  /** shutdown/exit, then close stdin (the daemon exits on EOF); kill it if it lingers. */
  async dispose(timeoutMs = 3000): Promise<void> {
    if (this.exited) return;
    const gone = this.waitForExit();
    try {
      await Promise.race([
        this.connection.sendRequest('shutdown').then(() => this.connection.sendNotification('exit')),
        new Promise((resolve) => setTimeout(resolve, 1000)),
      ]);
    } catch {
      /* already gone */
    }
    this.input.end(); // EOF on the daemon's stdin: it exits
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), timeoutMs);
    await gone;
    clearTimeout(timer);
  }
}

export function isCancelledError(e: unknown): boolean {
  return e instanceof DaemonError && e.code === ErrorCodes.requestCancelled;
}
