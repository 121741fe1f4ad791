/**
 * The chat controller: one daemon per window, the current session, and the relay between the
 * daemon and the webview. It renders what the daemon sends and answers what it asks; sessions,
 * commands and permissions are the daemon's business.
 */

import * as vscode from 'vscode';
import { applyWorkspaceEdit } from './applyEdit';
import { DaemonNotFound, type DaemonHandlers } from './daemon';
import { offerInstall } from './install';
import { CheckpointDaemon, openChangedFile, restoreTurn, ShowText, showTurnDiff, UnsavedKept } from './changes';
import { copyCode, insertCode } from './codeBlocks';
import { DocumentSink, DocumentSync } from './documents';
import { editorDiagnostics } from './diagnostics';
import { askPermission, askUser, askWorkspaceTrust, ShowDiff } from './permission';
import { PendingItem, selectionItem } from './selection';
import type { CancelToken, Reviews } from './reviews';
import { selectionQuestion } from './selection';
import { ModeDaemon, pickMode, pickSession, SessionHeader } from './sessionHeader';
import type { RestoreRequest, ToHost, ToWebview, TurnDiffRequest } from './shared/messages';
import type { ProgressValue } from './shared/lsp';
import type {
  CommandInfo, MentionItem, PermissionParams, PromptParams, PermissionResult, PromptResult, SessionInfo, SessionLoadResult, Update,
  UpdateParams,
} from './shared/protocol';

export { selectionPrompt } from './selection';

/** What the controller needs of a daemon connection (DaemonClient, or a fake in tests). */
export interface Daemon extends DocumentSink, CheckpointDaemon, ModeDaemon {
  readonly running: boolean;
  newSession(title?: string): Promise<SessionInfo>;
  listSessions(): Promise<SessionInfo[]>;
  loadSession(sessionId: string): Promise<SessionLoadResult>;
  prompt(sessionId: string, text: string, context?: PromptParams['context']): Promise<PromptResult>;
  cancel(sessionId: string): Promise<boolean>;
  listCommands(): Promise<CommandInfo[]>;
  /** toycoder/mentions/complete: what `@prefix` may name (files, folders, MCP resources). */
  completeMentions?(sessionId: string | undefined, prefix: string, limit?: number): Promise<MentionItem[]>;
  dispose(): Promise<void>;
}

export type StartDaemon = (handlers: DaemonHandlers) => Promise<Daemon>;

/** The chat panel as the controller sees it. */
export interface ChatSurface {
  post(message: ToWebview): void;
  /** Show and focus the panel; resolves when its webview listens. */
  reveal(): Promise<void>;
  hide(): Promise<void>;
  /** The view's description: the session's title and mode. */
  setDescription?(text: string): void;
}

export interface ControllerOptions {
  startDaemon: StartDaemon;
  surface: ChatSurface;
  showDiff: ShowDiff;
  /** A read-only document (a turn's diff of a file). */
  showText: ShowText;
  log: (line: string) => void;
  root: vscode.Uri | undefined;
  /** Permission requests as cards in the chat; without it (or with `permission.style: modal`), the modal. */
  reviews?: Reviews;
}

/** The `turn_elsewhere` update (docs/protocol.md): a turn of this session runs in another editor. Read
 *  field by field, as the daemon sends it, so a daemon that does not send it changes nothing. */
function turnElsewhere(u: { kind: string }): { client: string; running: boolean; prompt?: string } | undefined {
  if (u.kind !== 'turn_elsewhere') return undefined;
  const e = u as { client?: unknown; running?: unknown; prompt?: unknown };
  return { client: typeof e.client === 'string' && e.client ? e.client : 'another editor', running: e.running === true,
    prompt: typeof e.prompt === 'string' ? e.prompt : undefined };
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

export class ChatController implements vscode.Disposable {
  private daemon: Daemon | undefined;
  /** What the next prompt carries besides its text (Add Selection, a pasted image), with its chip's label. */
  private pending: PendingItem[] = [];
  private starting: Promise<Daemon> | undefined;
  private docSync: DocumentSync | undefined;
  private commands: CommandInfo[] = [];
  private sessionId: string | undefined;
  private turn: Promise<void> | undefined;
  private turnPrompt = '';
  private daemonState: ToWebview & { type: 'daemon' } = { type: 'daemon', state: 'starting' };
  private headerState: ToWebview & { type: 'header' } = { type: 'header', title: '', mode: '' };
  private readonly progress = new Map<string | number, { report: (m: string) => void; done: () => void }>();
  private disposed = false;
  private everStarted = false;

  private readonly header: SessionHeader;
  private readonly unsaved: UnsavedKept;

  constructor(private readonly options: ControllerOptions) {
    this.unsaved = new UnsavedKept(options.root);
    this.header = new SessionHeader((text) => options.surface.setDescription?.(text),
      (title, mode) => {
        if (title !== this.headerState.title || mode !== this.headerState.mode) this.post({ type: 'header', title, mode });
      });
  }

  get currentSessionId(): string | undefined {
    return this.sessionId;
  }

  get turnRunning(): boolean {
    return this.turn !== undefined;
  }

  private post(message: ToWebview): void {
    if (message.type === 'daemon') this.daemonState = message;
    else if (message.type === 'header') this.headerState = message;
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
      update: (params) => this.onUpdate(params),
      commandsChanged: (params) => {
        this.commands = params.commands;
        this.post({ type: 'commands', commands: this.commands });
      },
      requestPermission: (params, token) => this.requestPermission(params, token),
      askUser: (params, token) => askUser(params, token),
      workspaceTrust: (params, token) => askWorkspaceTrust(params, token as vscode.CancellationToken),
      progress: (token, value) => this.onProgress(token, value),
      applyEdit: (params) => applyWorkspaceEdit(params, this.options.log),
      diagnostics: (params, token) => editorDiagnostics(params, token),
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
      if (e instanceof DaemonNotFound) {
        void offerInstall(e.exe).then((done) => done && this.options.log(`[toycoder-vscode] ${done}`));
      }
      throw e;
    }
    if (this.disposed) {
      await daemon.dispose();
      throw new Error('disposed');
    }
    this.daemon = daemon;
    this.header.modes = daemon.availableModes ?? [];
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

  /** The current session's updates: title and mode for the header, a reload for another daemon's turn, a
   *  notice when another editor deleted it. */
  private onUpdate(params: UpdateParams): void {
    if (params.sessionId !== this.sessionId) return;
    const u = params.update;
    if (u.kind === 'session_info') this.header.show(u.session);
    // another daemon's turn (never during ours: the session is locked while a turn runs): reload
    else if (u.kind === 'session_changed') void (this.turn ?? this.showSession(params.sessionId).catch(() => undefined));
    // another editor deleted it: the daemon's one line, as sent
    else if (u.kind === 'session_deleted') this.post({ type: 'notice', level: 'error', text: u.message });
    // a prompt answered in another editor first: its card (if any) says so; a question's prompt
    // closes on the $/cancelRequest that follows
    else if (u.kind === 'permission_resolved') {
      if (u.decision !== 'answered' && u.decision !== 'dismissed') this.options.reviews?.resolved(params.sessionId, u.toolCallId, u.decision, u.by);
    }
    else {
      const elsewhere = turnElsewhere(u);
      if (elsewhere) this.post({ type: 'elsewhere', ...elsewhere });
      else {
        this.post({ type: 'update', params });
        this.tellUnsavedKept(u);
      }
    }
  }

  /** Files a turn (here or in another editor) or a restore wrote on disk: VS Code reloads their clean
   *  documents; those with unsaved changes are kept, and we say so. An edit that went into an editor's
   *  buffer (`inEditor`) did not touch the disk. */
  private tellUnsavedKept(u: Update): void {
    const paths = u.kind === 'tool_result' ? u.changedPaths ?? []
      : u.kind === 'changes' ? u.files.filter((f) => !f.inEditor).map((f) => vscode.Uri.parse(f.uri).fsPath) : [];
    if (paths.length) this.unsaved.notice(paths, (names) => `ToyCoder: ${names} changed on disk`);
  }

  /** The view's mode picker: the daemon's modes, set on the current session (created first if need be). */
  async pickMode(): Promise<void> {
    const daemon = await this.ensureDaemon();
    const sessionId = this.sessionId ?? await this.newDaemonSession(daemon);
    const info = await pickMode(daemon, sessionId, this.header.currentMode);
    if (info && info.sessionId === this.sessionId) this.header.show(info);
  }

  private async newDaemonSession(daemon: Daemon): Promise<string> {
    const info = await daemon.newSession();
    this.header.show(info);
    return (this.sessionId = info.sessionId);
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
    this.post(this.headerState);
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
      case 'pickMode':
        return this.pickMode().catch((e: unknown) => {
          void vscode.window.showErrorMessage(`ToyCoder: cannot set the mode: ${errorMessage(e)}`);
        });
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
      case 'turnDiff':
        return this.turnDiff(message.request);
      case 'mentions':
        return this.mentions(message.prefix);
      case 'removeChip':
        this.pending.splice(message.index, 1);
        return this.postChips();
      case 'attachImage':
        this.pending.push({ label: message.name, item: { type: 'image', ...message.image } });
        return this.postChips();
    }
  }

  /** `@` in the prompt box: the daemon lists what the prefix may name (nothing while it is not running). */
  private async mentions(prefix: string): Promise<void> {
    const daemon = this.daemon;
    if (!daemon?.running || !daemon.completeMentions) return;
    try {
      this.post({ type: 'mentionItems', prefix, items: await daemon.completeMentions(this.sessionId, prefix, 30) });
    } catch {
      /* no completion: the prompt still goes as typed */
    }
  }

  /** A changes card's Undo / Revert / Force; not while a turn runs (it may be writing those files). */
  private async turnDiff(request: TurnDiffRequest): Promise<void> {
    if (this.sessionId) await showTurnDiff(await this.ensureDaemon(), this.sessionId, request, this.options.showText);
  }

  private async restore(request: RestoreRequest): Promise<void> {
    if (this.turn || !this.sessionId) {
      const message = this.turn ? 'A turn is running: stop it first.' : 'No session to restore.';
      this.post({ type: 'restoreFailed', request, message });
      return;
    }
    await restoreTurn(await this.ensureDaemon(), this.sessionId, request, (m) => this.post(m), this.unsaved);
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
    this.header.show(loaded.session);
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
      const sessionId = this.sessionId ?? await this.newDaemonSession(daemon);
      this.header.prompted(text);
      const context = this.pending.map((p) => p.item);
      if (context.length) {
        this.pending = [];
        this.postChips(); // sent: the chips go
      }
      const result = await daemon.prompt(sessionId, text, context);
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
    this.header.show(null);
    this.post({ type: 'transcript', session: null, entries: [] });
  }

  async switchSession(): Promise<void> {
    const daemon = await this.ensureDaemon();
    const pick = await pickSession(await daemon.listSessions(), this.sessionId);
    if (!pick) return;
    await this.stopTurn();
    try {
      await this.showSession(pick.sessionId);
    } catch (e) {
      void vscode.window.showErrorMessage(`ToyCoder: cannot open the session: ${errorMessage(e)}`);
    }
  }

  /** "Add Selection to Chat": the selection goes with the next prompt, as a chip until then. */
  async addSelection(editor: vscode.TextEditor | undefined): Promise<void> {
    const selection = selectionItem(editor);
    if (!selection) return;
    this.pending.push(selection);
    await this.options.surface.reveal();
    this.postChips();
  }

  private postChips(): void {
    this.post({ type: 'chips', labels: this.pending.map((p) => p.label) });
  }

  async askAboutSelection(editor: vscode.TextEditor | undefined): Promise<void> {
    const text = await selectionQuestion(editor);
    if (text === undefined) return;
    await this.options.surface.reveal();
    await this.prompt(text);
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
