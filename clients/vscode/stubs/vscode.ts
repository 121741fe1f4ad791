/**
 * A small stand-in for the `vscode` module, for unit tests under Node (esbuild aliases `vscode` to
 * this file when it bundles test/). Only what the extension uses; tests replace the `window`,
 * `workspace` and `commands` functions they care about, and `resetStub()` restores the defaults.
 * Kept outside test/ so that it is never mistaken for a test.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */

type Listener<T> = (e: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => void = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  private cancelled = false;
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

export class Uri {
  private constructor(readonly scheme: string, readonly path: string, readonly query = '', readonly fragment = '') {}
  static file(path: string): Uri {
    return new Uri('file', path.replace(/\\/g, '/'));
  }
  static parse(value: string): Uri {
    const m = /^([a-zA-Z][\w+.-]*):(?:\/\/[^/]*)?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
    if (!m) throw new Error(`bad uri ${value}`);
    return new Uri(m[1], decodeURIComponent(m[2]), m[3] ?? '', m[4] ?? '');
  }
  static from(c: { scheme: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(c.scheme, c.path ?? '', c.query ?? '', c.fragment ?? '');
  }
  static joinPath(base: Uri, ...segments: string[]): Uri {
    const path = [base.path.replace(/\/+$/, ''), ...segments.map((s) => s.replace(/^\/+|\/+$/g, ''))].join('/');
    return new Uri(base.scheme, path, base.query, base.fragment);
  }
  get fsPath(): string {
    return this.path;
  }
  with(change: { scheme?: string; path?: string; query?: string }): Uri {
    return new Uri(change.scheme ?? this.scheme, change.path ?? this.path, change.query ?? this.query, this.fragment);
  }
  toString(): string {
    const auth = this.scheme === 'file' ? '//' : '';
    return `${this.scheme}:${auth}${encodeURI(this.path)}${this.query ? `?${this.query}` : ''}`;
  }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
  isEqual(other: Position): boolean {
    return this.line === other.line && this.character === other.character;
  }
}

export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(startLine: number, startCharacter: number, endLine: number, endCharacter: number) {
    this.start = new Position(startLine, startCharacter);
    this.end = new Position(endLine, endCharacter);
  }
  isEqual(other: Range): boolean {
    return this.start.isEqual(other.start) && this.end.isEqual(other.end);
  }
}

/** The replacements of a WorkspaceEdit, in order (what the stub's `workspace.applyEdit` applies). */
export class WorkspaceEdit {
  readonly replacements: Array<{ uri: Uri; range: Range; newText: string }> = [];
  replace(uri: Uri, range: Range, newText: string): void {
    this.replacements.push({ uri, range, newText });
  }
}

/**
 * An open text document: `edit` changes it as the editor would (version up, dirty, a change event),
 * `save` clears the dirty flag and counts (`saveResult` says what it answers; a function may throw).
 */
export class StubDocument {
  version = 1;
  isDirty = false;
  saves = 0;
  saveResult: () => boolean = () => true;
  constructor(readonly uri: Uri, public text: string, readonly languageId = 'plaintext') {}
  getText(): string {
    return this.text;
  }
  private lines(): string[] {
    return this.text.split('\n');
  }
  validateRange(r: Range): Range {
    const lines = this.lines();
    const clamp = (p: Position): [number, number] => {
      if (p.line >= lines.length) return [lines.length - 1, lines[lines.length - 1].length];
      return [p.line, Math.min(p.character, lines[p.line].length)];
    };
    return new Range(...clamp(r.start), ...clamp(r.end));
  }
  offsetAt(p: Position): number {
    return this.lines().slice(0, p.line).reduce((n, l) => n + l.length + 1, 0) + p.character;
  }
  edit(range: Range, newText: string): void {
    const r = this.validateRange(range);
    this.text = this.text.slice(0, this.offsetAt(r.start)) + newText + this.text.slice(this.offsetAt(r.end));
    this.version++;
    this.isDirty = true;
    changeDocs.fire({ document: this });
  }
  async save(): Promise<boolean> {
    this.saves++;
    const saved = this.saveResult();
    if (saved) this.isDirty = false;
    return saved;
  }
}

export class TabInputText {
  constructor(readonly uri: Uri) {}
}

export class TabInputTextDiff {
  constructor(readonly original: Uri, readonly modified: Uri) {}
}

/** The editor tabs `window.tabGroups` shows; tests push tabs here, `tabGroups.close` removes them. */
export const openTabs: Array<{ label: string; input: unknown }> = [];

/** Every status-bar item created, in order. */
export const statusBarItems: Array<{ text: string; tooltip: unknown; command: unknown; visible: boolean }> = [];

export enum StatusBarAlignment { Left = 1, Right = 2 }
export enum ProgressLocation { SourceControl = 1, Window = 10, Notification = 15 }
export enum ViewColumn { Active = -1, Beside = -2, One = 1 }
export enum ConfigurationTarget { Global = 1, Workspace = 2, WorkspaceFolder = 3 }

/** What `env.clipboard` holds. */
export const clipboardText = { value: '' };

/** Every call of a stubbed API, for assertions: [name, args]. */
export const calls: Array<[string, unknown[]]> = [];

function recorder<R>(name: string, result: (...args: any[]) => R) {
  return (...args: any[]): R => {
    calls.push([name, args]);
    return result(...args);
  };
}

function defaults() {
  return {
    window: {
      showWarningMessage: recorder('window.showWarningMessage', async () => undefined as string | undefined),
      showErrorMessage: recorder('window.showErrorMessage', async () => undefined as string | undefined),
      showInformationMessage: recorder('window.showInformationMessage', async () => undefined as string | undefined),
      showQuickPick: recorder('window.showQuickPick', async () => undefined as any),
      showInputBox: recorder('window.showInputBox', async () => undefined as string | undefined),
      createTerminal: recorder('window.createTerminal', (name: string) => ({
        name, show: recorder('terminal.show', () => undefined), sendText: recorder('terminal.sendText', (_t: string) => undefined),
      })),
      showTextDocument: recorder('window.showTextDocument', async (doc: any) => ({ document: doc })),
      withProgress: recorder('window.withProgress', (_o: unknown, task: (p: { report(v: unknown): void }) => unknown) =>
        task({ report: () => undefined })),
      createOutputChannel: recorder('window.createOutputChannel', (name: string) => ({
        name, lines: [] as string[],
        appendLine(line: string) { this.lines.push(line); },
        append() { /* */ }, show() { /* */ }, dispose() { /* */ },
      })),
      registerWebviewViewProvider: recorder('window.registerWebviewViewProvider', () => new Disposable()),
      createStatusBarItem: recorder('window.createStatusBarItem', () => {
        const item = {
          text: '', tooltip: undefined as unknown, command: undefined as unknown, visible: false,
          show() { this.visible = true; }, hide() { this.visible = false; }, dispose() { this.visible = false; },
        };
        statusBarItems.push(item);
        return item;
      }),
      tabGroups: {
        get all() { return [{ tabs: openTabs.slice() }]; },
        get activeTabGroup() { return { tabs: openTabs.slice(), activeTab: openTabs[openTabs.length - 1] }; },
        close: recorder('window.tabGroups.close', async (tabs: unknown[]) => {
          for (const t of tabs) {
            const i = openTabs.indexOf(t as (typeof openTabs)[number]);
            if (i >= 0) openTabs.splice(i, 1);
          }
          return true;
        }),
      },
      activeTextEditor: undefined as any,
      visibleTextEditors: [] as any[],
      setStatusBarMessage: recorder('window.setStatusBarMessage', () => new Disposable()),
    },
    workspace: {
      workspaceFolders: undefined as any,
      textDocuments: [] as any[],
      onDidOpenTextDocument: openDocs.event,
      onDidChangeTextDocument: changeDocs.event,
      onDidCloseTextDocument: closeDocs.event,
      onDidChangeConfiguration: new EventEmitter<any>().event,
      // applies to the StubDocuments in textDocuments; false (nothing applied) when one is missing.
      // Last edit first, so each range means the original text, as in VS Code.
      applyEdit: recorder('workspace.applyEdit', async (edit: WorkspaceEdit) => {
        const planned = edit.replacements.map((r) => ({ ...r, doc: workspace.textDocuments
          .find((d) => d instanceof StubDocument && d.uri.toString() === r.uri.toString()) as StubDocument | undefined }));
        if (planned.some((p) => !p.doc)) return false;
        planned.sort((a, b) => b.doc!.offsetAt(b.range.start) - a.doc!.offsetAt(a.range.start));
        for (const p of planned) p.doc!.edit(p.range, p.newText);
        return true;
      }),
      openTextDocument: recorder('workspace.openTextDocument', async (uri: Uri) => {
        const text = virtualDocs.get(uri.toString());
        if (text === undefined) throw new Error(`cannot open ${uri.toString()}`);
        return { uri, getText: () => text, languageId: 'plaintext', version: 1 };
      }),
      asRelativePath: recorder('workspace.asRelativePath', (uri: Uri | string) => (typeof uri === 'string' ? uri : uri.path)),
      registerTextDocumentContentProvider: recorder('workspace.registerTextDocumentContentProvider', () => new Disposable()),
      getConfiguration: recorder('workspace.getConfiguration', () => ({
        get: (key: string, fallback?: unknown) => (key in settings ? settings[key] : fallback),
        update: recorder('configuration.update', async (key: string, value: unknown, _target?: unknown) => {
          settings[key] = value;
        }),
      })),
    },
    commands: {
      executeCommand: recorder('commands.executeCommand', async () => undefined as any),
      registerCommand: recorder('commands.registerCommand', () => new Disposable()),
    },
    env: {
      openExternal: recorder('env.openExternal', async () => true),
      clipboard: {
        writeText: recorder('env.clipboard.writeText', async (t: string): Promise<void> => { clipboardText.value = t; }),
        readText: recorder('env.clipboard.readText', async (): Promise<string> => clipboardText.value),
      },
    },
  };
}

/** Diagnostics `languages.getDiagnostics` reports, by URI string; fire `diagnosticsChanged` after a change. */
export const diagnostics = new Map<string, any[]>();
export const diagnosticsChanged = new EventEmitter<{ uris: Uri[] }>();
export enum DiagnosticSeverity { Error = 0, Warning = 1, Information = 2, Hint = 3 }
export const languages = {
  onDidChangeDiagnostics: diagnosticsChanged.event,
  getDiagnostics: ((uri?: Uri) => (uri ? diagnostics.get(uri.toString()) ?? []
    : [...diagnostics].map(([u, ds]) => [Uri.parse(u), ds]))) as any,
};

/** Events tests fire to simulate editors opening, changing and closing documents. */
export const openDocs = new EventEmitter<any>();
export const changeDocs = new EventEmitter<any>();
export const closeDocs = new EventEmitter<any>();
/** Text of documents `workspace.openTextDocument` can open, by URI string. */
export const virtualDocs = new Map<string, string>();
/** `workspace.getConfiguration('toycoder')` values. */
export const settings: Record<string, unknown> = {};

export const window = defaults().window;
export const workspace = defaults().workspace;
export const commands = defaults().commands;
export const env = defaults().env;

export function resetStub(): void {
  const d = defaults();
  Object.assign(window, d.window);
  Object.assign(workspace, d.workspace);
  Object.assign(commands, d.commands);
  Object.assign(env, d.env);
  calls.length = 0;
  clipboardText.value = '';
  openTabs.length = 0;
  statusBarItems.length = 0;
  virtualDocs.clear();
  diagnostics.clear();
  for (const k of Object.keys(settings)) delete settings[k];
}
