/**
 * The chat controller: one daemon per window, the current session, and the relay between the
 * daemon and the webview. It renders what the daemon sends and answers what it asks; sessions,
 * commands and permissions are the daemon's business.
 */

import * as vscode from 'vscode';
import type { DaemonHandlers } from './daemon';
import { PROPOSAL_SCHEME } from './diffView';
import { CheckpointDaemon, openChangedFile, restoreTurn } from './changes';
import { copyCode, insertCode } from './codeBlocks';
import { DocumentSink, DocumentSync } from './documents';
import { askPermission, askUser, ShowDiff } from './permission';
import type { CancelToken, Reviews } from './reviews';
import type { RestoreRequest, ToHost, ToWebview } from './shared/messages';
import type { ProgressValue } from './shared/lsp';
import type {
  CommandInfo, PermissionParams, PermissionResult, PromptResult, SessionInfo, SessionLoadResult,
} from './shared/protocol';

/** What the controller needs of a daemon connection (DaemonClient, or a fake in tests). */
export interface Daemon extends DocumentSink, CheckpointDaemon {
  readonly running: boolean;
  newSession(title?: string): Promise<SessionInfo>;
  listSessions(): Promise<SessionInfo[]>;
  loadSession(sessionId: string): Promise<SessionLoadResult>;
  prompt(sessionId: string, text: string): Promise<PromptResult>;
  cancel(sessionId: string): Promise<boolean>;
  listCommands(): Promise<CommandInfo[]>;
  dispose(): Promise<void>;
}

export type StartDaemon = (handlers: DaemonHandlers) => Promise<Daemon>;

/** The chat panel as the controller sees it. */
export interface ChatSurface {
  post(message: ToWebview): void;
  /** Show and focus the panel; resolves when its webview listens. */
  reveal(): Promise<void>;
  hide(): Promise<void>;
}

export interface ControllerOptions {
  startDaemon: StartDaemon;
  surface: ChatSurface;
  showDiff: ShowDiff;
  log: (line: string) => void;
  root: vscode.Uri | undefined;
  /** Permission requests as cards in the chat; without it (or with `permission.style: modal`), the modal. */
  reviews?: Reviews;
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The prompt for "Ask About Selection": the question, the file, the line range and the code. */
export function selectionPrompt(question: string, path: string, startLine: number, endLine: number,
  languageId: string, text: string): string {
  let fence = '```';
  while (text.includes(fence)) fence += '`';
  const range = startLine === endLine ? `line ${startLine}` : `lines ${startLine}-${endLine}`;
  return `${question.trim() || 'Explain this code.'}\n\nFrom \`${path}\`, ${range}:\n\n${fence}${languageId}\n${text}\n${fence}`;
}

export class ChatController implements vscode.Disposable {
  private daemon: Daemon | undefined;
  private starting: Promise<Daemon> | undefined;
  private docSync: DocumentSync | undefined;
  private commands: CommandInfo[] = [];
  private sessionId: string | undefined;
  private turn: Promise<void> | undefined;
  private turnPrompt = '';
  private daemonState: ToWebview & { type: 'daemon' } = { type: 'daemon', state: 'starting' };
  private readonly progress = new Map<string | number, { report: (m: string) => void; done: () => void }>();
  private disposed = false;
  private everStarted = false;

  constructor(private readonly options: ControllerOptions) {}

  get currentSessionId(): string | undefined {
    return this.sessionId;
  }

  get turnRunning(): boolean {
    return this.turn !== undefined;
  }

  private post(message: ToWebview): void {
    if (message.type === 'daemon') this.daemonState = message;
    this.options.surface.post(message);
  }

  // ---- the daemon -------------------------------------------------------------------------------

  ensureDaemon(): Promise<Daemon> {
    if (this.daemon?.running) return Promise.resolve(this.daemon);
    if (!this.starting) {
      this.starting = this.start().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async start(): Promise<Daemon> {
    this.post({ type: 'daemon', state: 'starting' });
    let daemon: Daemon | undefined;
    const handlers: DaemonHandlers = {
      update: (params) => {
        if (params.sessionId === this.sessionId) this.post({ type: 'update', params });
      },
      requestPermission: (params, token) => this.requestPermission(params, token),
      askUser: (params, token) => askUser(params, token),
      progress: (token, value) => this.onProgress(token, value),
      showMessage: (type, message) => {
        this.options.log(`[daemon] ${message}`);
        if (type === 1) void vscode.window.showErrorMessage(`ToyCoder: ${message}`);
        else if (type === 2) void vscode.window.showWarningMessage(`ToyCoder: ${message}`);
        else if (type === 3) void vscode.window.showInformationMessage(`ToyCoder: ${message}`);
      },
      stderr: (line) => this.options.log(line),
      exit: (code, signal) => {
        if (this.daemon !== daemon) return; // an old one we replaced
        this.daemon = undefined;
        this.docSync?.dispose();
        this.docSync = undefined;
        this.endAllProgress();
        this.options.reviews?.cancelAll();
        const how = signal ? `was killed (${signal})` : `exited (code ${code})`;
        this.options.log(`[toycoder-vscode] the daemon ${how}`);
        if (!this.disposed) this.post({ type: 'daemon', state: 'exited', message: `The ToyCoder daemon ${how}.` });
      },
    };
    try {
      daemon = await this.options.startDaemon(handlers);
    } catch (e) {
      const message = errorMessage(e);
      this.options.log(`[toycoder-vscode] ${message}`);
      this.post({ type: 'daemon', state: 'exited', message });
      throw e;
    }
    if (this.disposed) {
      await daemon.dispose();
      throw new Error('disposed');
    }
    this.daemon = daemon;
    this.everStarted = true;
    this.docSync = new DocumentSync(daemon, this.options.root);
    this.post({ type: 'daemon', state: 'ready' });
    try {
      this.commands = await daemon.listCommands();
      this.post({ type: 'commands', commands: this.commands });
    } catch (e) {
      this.options.log(`[toycoder-vscode] commands/list failed: ${errorMessage(e)}`);
    }
    return daemon;
  }

  async restart(): Promise<void> {
    const old = this.daemon;
    this.daemon = undefined;
    this.docSync?.dispose();
    this.docSync = undefined;
    if (old) await old.dispose();
    try {
      await this.ensureDaemon();
      if (this.sessionId) await this.showSession(this.sessionId);
    } catch (e) {
      this.options.log(`[toycoder-vscode] restart failed: ${errorMessage(e)}`);
    }
  }

  private requestPermission(params: PermissionParams, token: CancelToken): Promise<PermissionResult> {
    const style = vscode.workspace.getConfiguration('toycoder').get<string>('permission.style', 'inline');
    if (this.options.reviews && style !== 'modal') return this.options.reviews.request(params, token);
    return askPermission(params, token as vscode.CancellationToken, this.options.showDiff);
  }

  private onProgress(token: string | number, value: ProgressValue): void {
    if (value.kind === 'begin') {
      void vscode.window.withProgress({ location: vscode.ProgressLocation.Window, title: 'ToyCoder' },
        (progress) => new Promise<void>((done) => {
          this.progress.set(token, { report: (message) => progress.report({ message }), done });
          if (value.message) progress.report({ message: value.message });
        }));
      this.post({ type: 'progress', message: value.message ?? value.title });
    } else if (value.kind === 'report') {
      if (value.message) {
        this.progress.get(token)?.report(value.message);
        this.post({ type: 'progress', message: value.message });
      }
    } else {
      this.progress.get(token)?.done();
      this.progress.delete(token);
      if (this.progress.size === 0) this.post({ type: 'progress', message: null });
    }
  }

  private endAllProgress(): void {
    for (const p of this.progress.values()) p.done();
    this.progress.clear();
  }

  // ---- the webview ------------------------------------------------------------------------------

  /** A (re)created webview: send it the state it needs to draw. */
  async onReady(): Promise<void> {
    this.post(this.daemonState);
    if (this.commands.length) this.post({ type: 'commands', commands: this.commands });
    if (this.everStarted && !this.daemon?.running) return; // exited: the banner offers a restart
    try {
      await this.ensureDaemon();
      if (this.sessionId) {
        await this.showSession(this.sessionId);
        if (this.turn) this.post({ type: 'turnStarted', text: this.turnPrompt });
      }
    } catch {
      /* the banner says why */
    }
    this.options.reviews?.repost(); // after the transcript, which clears the conversation
  }

  async handle(message: ToHost): Promise<void> {
    switch (message.type) {
      case 'ready':
        return this.onReady();
      case 'prompt':
        return this.prompt(message.text);
      case 'cancel':
        return this.cancel();
      case 'restart':
        return this.restart();
      case 'openLink':
        return this.openLink(message.href);
      case 'copyCode':
        return copyCode(message.text);
      case 'insertCode':
        return insertCode(message.text);
      case 'permissionDecision':
        this.options.reviews?.decide(message.id, message.decision, 'chat');
        return;
      case 'openDiff':
        return this.options.reviews?.openDiff(message.id);
      case 'restore':
        return this.restore(message.request);
      case 'openFile':
        return openChangedFile(message.uri);
    }
  }

  /** A changes card's Undo / Revert / Force; not while a turn runs (it may be writing those files). */
  private async restore(request: RestoreRequest): Promise<void> {
    if (this.turn || !this.sessionId) {
      const message = this.turn ? 'A turn is running: stop it first.' : 'No session to restore.';
      this.post({ type: 'restoreFailed', request, message });
      return;
    }
    await restoreTurn(await this.ensureDaemon(), this.sessionId, request, (m) => this.post(m), this.options.root);
  }

  private async openLink(href: string): Promise<void> {
    if (/^(https?|mailto):/i.test(href)) {
      await vscode.env.openExternal(vscode.Uri.parse(href));
    }
  }

  // ---- sessions and turns -----------------------------------------------------------------------

  private async showSession(sessionId: string): Promise<void> {
    const daemon = await this.ensureDaemon();
    const loaded = await daemon.loadSession(sessionId);
    this.sessionId = loaded.session.sessionId;
    this.post({ type: 'transcript', session: loaded.session, entries: loaded.transcript });
  }

  /** Run one prompt (a slash command is a prompt too) and follow the answer's action. */
  async prompt(text: string): Promise<void> {
    if (this.turn) {
      this.post({ type: 'notice', level: 'info', text: 'A turn is running: stop it first.' });
      return;
    }
    let done!: () => void;
    this.turn = new Promise<void>((resolve) => { done = resolve; });
    this.turnPrompt = text;
    try {
      this.post({ type: 'turnStarted', text });
      const daemon = await this.ensureDaemon();
      if (!this.sessionId) this.sessionId = (await daemon.newSession()).sessionId;
      const result = await daemon.prompt(this.sessionId, text);
      this.post({ type: 'turnEnded', result });
      await this.follow(result);
    } catch (e) {
      this.post({ type: 'turnFailed', message: errorMessage(e) });
    } finally {
      this.turn = undefined;
      done();
    }
  }

  private async follow(result: PromptResult): Promise<void> {
    const action = result.action;
    if (!action) return;
    if (action.kind === 'switch') {
      try {
        await this.showSession(action.sessionId);
        if (result.text) this.post({ type: 'notice', level: 'info', text: result.text });
      } catch (e) {
        this.post({ type: 'notice', level: 'error', text: `Cannot open session ${action.sessionId}: ${errorMessage(e)}` });
      }
    } else if (action.kind === 'quit') {
      await this.options.surface.hide();
    }
  }

  async cancel(): Promise<void> {
    if (!this.turn || !this.sessionId || !this.daemon?.running) return;
    try {
      await this.daemon.cancel(this.sessionId);
    } catch (e) {
      this.options.log(`[toycoder-vscode] cancel failed: ${errorMessage(e)}`);
    }
  }

  private async stopTurn(): Promise<void> {
    if (!this.turn) return;
    const turn = this.turn;
    await this.cancel();
    await turn;
  }

  /** A fresh conversation; the daemon's session is created by its first prompt (no empty sessions). */
  async newSession(): Promise<void> {
    await this.stopTurn();
    this.sessionId = undefined;
    this.post({ type: 'transcript', session: null, entries: [] });
  }

  async switchSession(): Promise<void> {
    const daemon = await this.ensureDaemon();
    const sessions = await daemon.listSessions();
    if (sessions.length === 0) {
      void vscode.window.showInformationMessage('ToyCoder: no sessions in this workspace yet.');
      return;
    }
    const items = sessions.map((s) => ({
      label: s.title || '(untitled)',
      description: `${s.messageCount} messages · ${s.updatedAt.replace('T', ' ').replace(/\+00:00$|Z$/, ' UTC')}`,
      detail: s.sessionId === this.sessionId ? `${s.sessionId} (current)` : s.sessionId,
      sessionId: s.sessionId,
    }));
    const pick = await vscode.window.showQuickPick(items, { title: 'ToyCoder: Switch Session', placeHolder: 'Resume a session', matchOnDetail: true });
    if (!pick) return;
    await this.stopTurn();
    try {
      await this.showSession(pick.sessionId);
    } catch (e) {
      void vscode.window.showErrorMessage(`ToyCoder: cannot open the session: ${errorMessage(e)}`);
    }
  }

  async askAboutSelection(editor: vscode.TextEditor | undefined): Promise<void> {
    if (!editor || editor.selection.isEmpty) {
      void vscode.window.showInformationMessage('ToyCoder: select some code first.');
      return;
    }
    if (editor.document.uri.scheme === PROPOSAL_SCHEME) {
      // a proposal's text is not a file yet: asking about it would send a path that does not hold it
      void vscode.window.showInformationMessage('ToyCoder: this is a proposed change, not a file; decide on it in the chat.');
      return;
    }
    const sel = editor.selection;
    const text = editor.document.getText(sel);
    const startLine = sel.start.line + 1;
    const endLine = sel.end.character === 0 && sel.end.line > sel.start.line ? sel.end.line : sel.end.line + 1;
    const path = vscode.workspace.asRelativePath(editor.document.uri, false);
    const question = await vscode.window.showInputBox({
      title: 'ToyCoder: Ask About Selection',
      prompt: `Your question about ${path}:${startLine}-${endLine}`,
      placeHolder: 'Explain this code.',
    });
    if (question === undefined) return;
    await this.options.surface.reveal();
    await this.prompt(selectionPrompt(question, path, startLine, endLine, editor.document.languageId, text));
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    this.docSync?.dispose();
    this.endAllProgress();
    const daemon = this.daemon;
    this.daemon = undefined;
    if (daemon) await daemon.dispose();
  }
}
