import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { ChatController, ChatSurface, Daemon, selectionPrompt } from '../../src/controller';
import type { DaemonHandlers } from '../../src/daemon';
import type { ToWebview } from '../../src/shared/messages';
import { Reviews } from '../../src/reviews';
import type { CheckpointDiff, CheckpointDiffParams, RestoreParams, RestoreResult } from '../../src/shared/checkpoints';
import type { PermissionParams, PromptResult, SessionInfo, SessionLoadResult, UpdateParams } from '../../src/shared/protocol';
import { CancellationTokenSource, StubDocument, Uri, calls, changeDocs, closeDocs, openDocs, resetStub, settings } from '../../stubs/vscode';

const usage = { promptTokens: 10, completionTokens: 2, totalTokens: 12 };

function session(id: string): SessionInfo {
  return { sessionId: id, title: id, createdAt: '2026-01-01T00:00:00+00:00', updatedAt: '2026-01-01T00:00:00+00:00', messageCount: 0 };
}

class FakeDaemon implements Daemon {
  running = true;
  prompts: Array<[string, string]> = [];
  cancels: string[] = [];
  docs: string[] = [];
  disposed = false;
  next = 1;
  onPrompt: (sid: string, text: string) => Promise<PromptResult> = async () =>
    ({ turnId: 't', stopReason: 'end_turn', text: 'ok', usage });
  constructor(readonly handlers: DaemonHandlers) {}
  availableModes = [{ id: 'ask', name: 'Ask' }, { id: 'read-only', name: 'Read only', description: 'No writes' }];
  async setMode(sid: string, mode: string) { return { ...session(sid), title: 'Named', mode }; }
  async newSession() { return session(`s${this.next++}`); }
  async listSessions() { return [session('s1'), session('old')]; }
  async loadSession(id: string): Promise<SessionLoadResult> {
    return { session: session(id), transcript: [{ role: 'user', text: `hello from ${id}` }, { role: 'assistant', text: 'hi' }] };
  }
  contexts: unknown[] = [];
  async prompt(sid: string, text: string, context?: unknown[]) {
    this.prompts.push([sid, text]);
    this.contexts.push(context);
    return this.onPrompt(sid, text);
  }
  async cancel(sid: string) { this.cancels.push(sid); return true; }
  async listCommands() { return [{ name: 'help', usage: '/help [command]', help: 'Help.', aliases: ['?'], source: 'builtin' }]; }
  mentionAsks: Array<[string | undefined, string]> = [];
  async completeMentions(sid: string | undefined, prefix: string) {
    this.mentionAsks.push([sid, prefix]);
    return [{ label: 'calc.py', kind: 'file' as const, uri: 'file:///ws/calc.py' }];
  }
  restores: RestoreParams[] = [];
  onRestore: (p: RestoreParams) => Promise<RestoreResult> = async (p) => ({ restored: p.paths ?? ['a.py'], conflicts: [], note: '' });
  async restoreCheckpoint(p: RestoreParams) { this.restores.push(p); return this.onRestore(p); }
  diffs: CheckpointDiffParams[] = [];
  onDiff: (p: CheckpointDiffParams) => Promise<CheckpointDiff> = async (p) =>
    ({ path: p.path, status: 'modified', diff: `--- a/${p.path}\n+++ b/${p.path}\n@@ -1 +1 @@\n-a\n+b\n` });
  async checkpointDiff(p: CheckpointDiffParams) { this.diffs.push(p); return this.onDiff(p); }
  didOpen(uri: string) { this.docs.push(`open ${uri}`); }
  didChange(uri: string, version: number, text: string) { this.docs.push(`change ${uri} ${version} ${text}`); }
  didClose(uri: string) { this.docs.push(`close ${uri}`); }
  async dispose() { this.disposed = true; this.running = false; }
}

function setup(withReviews = false) {
  const posted: ToWebview[] = [];
  const diffs: string[] = [];
  const texts: Array<[string, string]> = [];
  const reviews = withReviews ? new Reviews({
    post: (m) => { posted.push(m); },
    openDiff: async (p) => { diffs.push(p.path); return [`toycoder-proposal:/${p.path}?1`]; },
    closeTabs: async () => undefined,
    pendingChanged: () => undefined,
    log: () => undefined,
  }) : undefined;
  const daemons: FakeDaemon[] = [];
  const surface: ChatSurface & { hidden: number; revealed: number } = {
    hidden: 0, revealed: 0,
    post: (m) => { posted.push(m); },
    reveal: async () => { surface.revealed++; },
    hide: async () => { surface.hidden++; },
  };
  const controller = new ChatController({
    root: Uri.file('/ws') as unknown as vscode.Uri,
    surface,
    reviews,
    log: () => undefined,
    showDiff: async () => undefined,
    showText: async (name, text) => { texts.push([name, text]); },
    startDaemon: async (handlers) => {
      const d = new FakeDaemon(handlers);
      daemons.push(d);
      return d;
    },
  });
  return { controller, posted, daemons, surface, diffs, texts, types: () => posted.map((m) => m.type) };
}

beforeEach(() => resetStub());

test('a prompt starts the daemon and a session, relays updates of that session, then the answer', async () => {
  const { controller, posted, daemons, types } = setup();
  let release!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  const turn = controller.handle({ type: 'prompt', text: 'hi' });
  await new Promise((r) => setTimeout(r, 10));
  const d = daemons[0];
  d.onPrompt = async () => {
    await gate;
    return { turnId: 't', stopReason: 'end_turn', text: 'ok', usage };
  };
  await turn; // first prompt used the default answer
  assert.deepEqual(d.prompts, [['s1', 'hi']]);
  assert.deepEqual(types(), ['turnStarted', 'daemon', 'daemon', 'commands', 'header', 'turnEnded']);
  assert.deepEqual(posted[2], { type: 'daemon', state: 'ready' });
  assert.deepEqual(posted[4], { type: 'header', title: 's1', mode: '' }, 'the new session in the webview\'s header row');

  posted.length = 0;
  const second = controller.prompt('again');
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(controller.turnRunning, true);
  d.handlers.update({ sessionId: 's1', turnId: 't', update: { kind: 'text_delta', text: 'x' } });
  d.handlers.update({ sessionId: 'other', turnId: 'u', update: { kind: 'text_delta', text: 'not ours' } });
  await controller.prompt('while running');
  await controller.handle({ type: 'cancel' });
  assert.deepEqual(d.cancels, ['s1']);
  release();
  await second;
  assert.deepEqual(types(), ['turnStarted', 'update', 'notice', 'turnEnded']);
  assert.equal(d.prompts.length, 2, 'no second prompt while a turn runs');
});

test('toycoder/commands/changed replaces the slash-command completion the webview has', async () => {
  const { controller, posted, daemons } = setup();
  await controller.ensureDaemon();
  posted.length = 0;
  const commands = [
    { name: 'help', usage: '/help [command]', help: 'Help.', aliases: ['?'], source: 'builtin' },
    { name: 'fresh', usage: '/fresh', help: 'Something new', aliases: [], source: 'workspace' },
  ];
  daemons[0].handlers.commandsChanged!({ commands });
  assert.deepEqual(posted, [{ type: 'commands', commands }]);
});

test('slash command actions: switch loads and renders the transcript, quit hides the panel', async () => {
  const { controller, posted, daemons, surface } = setup();
  await controller.ensureDaemon();
  daemons[0].onPrompt = async (_sid, text) => text === '/quit'
    ? { turnId: 't', stopReason: 'command', text: 'bye', usage, action: { kind: 'quit' } }
    : { turnId: 't', stopReason: 'command', text: 'Switched.', usage, action: { kind: 'switch', sessionId: 'old' } };
  await controller.prompt('/switch old');
  assert.equal(controller.currentSessionId, 'old');
  const transcript = posted.find((m) => m.type === 'transcript');
  assert.ok(transcript && transcript.type === 'transcript');
  assert.equal(transcript.entries[0].text, 'hello from old');
  await controller.prompt('/quit');
  assert.equal(surface.hidden, 1);
});

test('provider errors end the turn with a message', async () => {
  const { controller, posted, daemons } = setup();
  await controller.ensureDaemon();
  daemons[0].onPrompt = async () => { throw new Error("provider 'openai' failed: authentication failed"); };
  await controller.prompt('hi');
  assert.deepEqual(posted[posted.length - 1], { type: 'turnFailed', message: "provider 'openai' failed: authentication failed" });
  assert.equal(controller.turnRunning, false);
});

test('the daemon exiting shows the banner; Restart starts a new one and resumes the session', async () => {
  const { controller, posted, daemons } = setup();
  await controller.prompt('hi');
  daemons[0].running = false;
  daemons[0].handlers.exit!(1, null);
  assert.deepEqual(posted[posted.length - 1], { type: 'daemon', state: 'exited', message: 'The ToyCoder daemon exited (code 1).' });
  posted.length = 0;
  await controller.onReady(); // a webview that reloads does not restart it behind the person's back
  assert.equal(daemons.length, 1);
  await controller.handle({ type: 'restart' });
  assert.equal(daemons.length, 2);
  const transcript = posted.find((m) => m.type === 'transcript');
  assert.ok(transcript && transcript.type === 'transcript' && transcript.session?.sessionId === 's1');
});

test('a daemon that cannot start says why in the panel', async () => {
  const posted: ToWebview[] = [];
  const controller = new ChatController({
    root: undefined, log: () => undefined, showDiff: async () => undefined, showText: async () => undefined,
    surface: { post: (m) => { posted.push(m); }, reveal: async () => undefined, hide: async () => undefined },
    startDaemon: async () => { throw new Error('cannot start the ToyCoder daemon: "toycoder-daemon" was not found'); },
  });
  await controller.prompt('hi');
  assert.deepEqual(posted.map((m) => m.type), ['turnStarted', 'daemon', 'daemon', 'turnFailed']);
  assert.match((posted[2] as { message: string }).message, /was not found/);
});

test('Switch Session offers the daemon\'s sessions in a QuickPick and renders the pick', async () => {
  const { controller, posted } = setup();
  let offered: Array<{ label: string; sessionId: string }> = [];
  (vscode.window as any).showQuickPick = async (items: Array<{ label: string; sessionId: string }>) => {
    offered = items;
    return items[1];
  };
  await controller.switchSession();
  assert.deepEqual(offered.map((i) => i.sessionId), ['s1', 'old']);
  assert.equal(controller.currentSessionId, 'old');
  assert.equal(posted[posted.length - 1].type, 'transcript');
});

test('New Session stops a running turn and clears the conversation', async () => {
  const { controller, posted, daemons } = setup();
  await controller.ensureDaemon();
  let finish!: () => void;
  daemons[0].onPrompt = () => new Promise((resolve) => {
    finish = () => resolve({ turnId: 't', stopReason: 'cancelled', text: '', usage });
  });
  const turn = controller.prompt('long');
  await new Promise((r) => setTimeout(r, 10));
  daemons[0].cancel = async (sid) => { daemons[0].cancels.push(sid); finish(); return true; };
  await controller.newSession();
  await turn;
  assert.deepEqual(daemons[0].cancels, ['s1']);
  assert.equal(controller.currentSessionId, undefined);
  assert.deepEqual(posted[posted.length - 1], { type: 'transcript', session: null, entries: [] });
  daemons[0].onPrompt = async () => ({ turnId: 't2', stopReason: 'end_turn', text: 'ok', usage });
  await controller.prompt('first of the new one');
  assert.equal(controller.currentSessionId, 's2', 'the session is created by its first prompt');
});

test('Ask About Selection sends the code with its path and line range', async () => {
  const { controller, daemons, surface } = setup();
  (vscode.window as any).showInputBox = async () => 'Why add?';
  (vscode.workspace as any).asRelativePath = () => 'src/app.py';
  const editor = {
    selection: { isEmpty: false, start: { line: 0, character: 0 }, end: { line: 2, character: 0 } },
    document: { uri: Uri.file('/ws/src/app.py'), languageId: 'python', getText: () => 'def add(a, b):\n    return a + b\n' },
  };
  await controller.askAboutSelection(editor as unknown as vscode.TextEditor);
  assert.equal(surface.revealed, 1);
  const [[, text]] = daemons[0].prompts;
  assert.equal(text, 'Why add?\n\nFrom `src/app.py`, lines 1-2:\n\n```python\ndef add(a, b):\n    return a + b\n\n```');
  assert.match(selectionPrompt('', 'a.md', 3, 3, 'markdown', 'x ``` y'), /^Explain this code\.\n\nFrom `a\.md`, line 3:\n\n````markdown\nx ``` y\n````$/);
});

test('workspace documents are synced in full; files outside the folder are not', async () => {
  const { controller, daemons } = setup();
  const doc = (path: string, version: number, text: string) =>
    ({ uri: Uri.file(path), languageId: 'python', version, getText: () => text });
  (vscode.workspace as any).textDocuments = [doc('/ws/open.py', 1, 'already open')];
  await controller.ensureDaemon();
  const d = daemons[0];
  openDocs.fire(doc('/ws/src/app.py', 1, 'v1'));
  openDocs.fire(doc('/elsewhere/x.py', 1, 'no'));
  changeDocs.fire({ document: doc('/ws/src/app.py', 2, 'v2 unsaved') });
  closeDocs.fire(doc('/ws/src/app.py', 2, ''));
  assert.deepEqual(d.docs, ['open file:///ws/open.py', 'open file:///ws/src/app.py',
    'change file:///ws/src/app.py 2 v2 unsaved', 'close file:///ws/src/app.py']);
  await controller.dispose();
  assert.equal(d.disposed, true);
  openDocs.fire(doc('/ws/late.py', 1, 'after dispose'));
  assert.equal(d.docs.length, 4);
});

test('workspace/applyEdit from the daemon lands in the open document, whose change is synced back', async () => {
  const { controller, daemons } = setup();
  const doc = new StubDocument(Uri.file('/ws/a.py'), 'x = 1\n', 'python');
  (vscode.workspace as any).textDocuments = [doc];
  await controller.ensureDaemon();
  const d = daemons[0];
  const uri = doc.uri.toString();
  const result = await d.handlers.applyEdit!({ label: 'ToyCoder: edit a.py', edit: { changes: { [uri]: [
    { range: { start: { line: 0, character: 4 }, end: { line: 0, character: 5 } }, newText: '2' }] } } });
  assert.deepEqual(result, { applied: true });
  assert.equal(doc.getText(), 'x = 2\n');
  assert.equal(doc.saves, 1, 'it was clean: saved');
  assert.deepEqual(d.docs, [`open ${uri}`, `change ${uri} 2 x = 2\n`]);
});

test('work-done progress goes to the window and the panel status line', async () => {
  const { controller, posted, daemons } = setup();
  await controller.ensureDaemon();
  const h = daemons[0].handlers;
  h.progress!('tok', { kind: 'begin', title: 'ToyCoder', message: 'thinking' });
  h.progress!('tok', { kind: 'report', message: 'running grep_search' });
  h.progress!('tok', { kind: 'end', message: 'done' });
  assert.deepEqual(posted.filter((m) => m.type === 'progress').map((m) => (m as { message: string | null }).message),
    ['thinking', 'running grep_search', null]);
  assert.ok(calls.some(([n]) => n === 'window.withProgress'));
});

const permissionParams: PermissionParams = {
  sessionId: 's1', turnId: 's1-1', toolCallId: 'call_1', tool: 'edit_file', level: 'sensitive', title: 'edit_file src/app.py',
  arguments: {}, preview: { kind: 'diff', path: 'src/app.py', diff: '--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-a\n+b\n' },
};

test('inline by default: a permission request is a card; its buttons and Open diff come back from the webview', async () => {
  const { controller, posted, daemons, diffs } = setup(true);
  await controller.ensureDaemon();
  const answer = daemons[0].handlers.requestPermission(permissionParams, new CancellationTokenSource().token as never);
  assert.equal(calls.some(([n]) => n === 'window.showWarningMessage'), false, 'no modal');
  const card = posted.find((m) => m.type === 'permission');
  assert.ok(card && card.type === 'permission');
  await controller.handle({ type: 'openDiff', id: card.id });
  assert.deepEqual(diffs, ['src/app.py']);
  await controller.handle({ type: 'permissionDecision', id: card.id, decision: 'allow_once' });
  assert.deepEqual(await answer, { decision: 'allow_once' });
  assert.deepEqual(posted[posted.length - 1], { type: 'permissionDecided', id: card.id, outcome: 'allow_once', source: 'chat' });
});

test('permission_resolved: a card still pending here records the other editor\'s decision; the withdrawal after it changes nothing', async () => {
  const { controller, posted, daemons } = setup(true);
  await controller.prompt('hi');
  const token = new CancellationTokenSource();
  const answer = daemons[0].handlers.requestPermission(permissionParams, token.token as never);
  const card = posted.find((m) => m.type === 'permission');
  assert.ok(card && card.type === 'permission');
  const resolved = (toolCallId: string) => daemons[0].handlers.update({ sessionId: 's1', turnId: 's1-1',
    update: { kind: 'permission_resolved', toolCallId, decision: 'allow_once', by: 'Neovim' } });
  resolved('call_other'); // another call's: this card stays
  assert.equal(posted.some((m) => m.type === 'permissionDecided'), false);
  resolved('call_1');
  token.cancel(); // the daemon's $/cancelRequest, which follows
  assert.deepEqual(await answer, { decision: 'allow_once' });
  assert.deepEqual(posted.filter((m) => m.type === 'permissionDecided'),
    [{ type: 'permissionDecided', id: card.id, outcome: 'allow_once', source: 'chat', by: 'Neovim' }]);
  assert.equal(posted.some((m) => m.type === 'update'), false, 'not a turn update');
});

test('permission.style modal: the native modal, as before', async () => {
  const { controller, posted, daemons } = setup(true);
  settings['permission.style'] = 'modal';
  (vscode.window as any).showWarningMessage = async (...args: unknown[]) => {
    calls.push(['window.showWarningMessage', args]);
    return 'Deny';
  };
  await controller.ensureDaemon();
  const answer = await daemons[0].handlers.requestPermission(permissionParams, new CancellationTokenSource().token as never);
  assert.deepEqual(answer, { decision: 'reject' });
  assert.equal(calls.filter(([n]) => n === 'window.showWarningMessage').length, 1);
  assert.equal(posted.some((m) => m.type === 'permission'), false);
});

test('a reloaded webview gets the pending card after the transcript; a dead daemon withdraws it', async () => {
  const { controller, posted, daemons } = setup(true);
  await controller.prompt('hi');
  const answer = daemons[0].handlers.requestPermission(permissionParams, new CancellationTokenSource().token as never);
  posted.length = 0;
  await controller.onReady();
  const types = posted.map((m) => m.type);
  assert.ok(types.indexOf('transcript') < types.indexOf('permission'), types.join(' '));
  daemons[0].running = false;
  daemons[0].handlers.exit!(1, null);
  assert.deepEqual(await answer, { decision: 'reject' });
  assert.ok(posted.some((m) => m.type === 'permissionDecided' && m.outcome === 'cancelled'));
});

test('Ask About Selection refuses a proposal document (it is not the file its path names)', async () => {
  const { controller, daemons } = setup();
  (vscode.window as any).showInputBox = async () => 'Why?';
  const editor = {
    selection: { isEmpty: false, start: { line: 0, character: 0 }, end: { line: 0, character: 3 } },
    document: { uri: Uri.from({ scheme: 'toycoder-proposal', path: '/src/app.py', query: '1' }), languageId: 'python', getText: () => 'def' },
  };
  await controller.askAboutSelection(editor as unknown as vscode.TextEditor);
  assert.equal(daemons.length, 0, 'nothing was sent');
  const info = calls.find(([n]) => n === 'window.showInformationMessage');
  assert.match(String(info?.[1][0]), /proposed change, not a file/);
});

test('Undo / Revert / Force from a changes card restore that turn of the current session; the answer goes back', async () => {
  const { controller, posted, daemons } = setup();
  await controller.prompt('change things');
  const d = daemons[0];
  posted.length = 0;
  d.onRestore = async () => ({ restored: ['a.py'], conflicts: [{ path: 'b.py', reason: 'changed since the agent wrote it' }],
    turnId: 'r1', note: 'Only changes made by ToyCoder are undone.' });
  (vscode.workspace as any).textDocuments = [{ uri: Uri.file('/ws/a.py'), isDirty: true }, { uri: Uri.file('/ws/c.py'), isDirty: true }];
  await controller.handle({ type: 'restore', request: { turnId: 't' } });
  assert.deepEqual(d.restores, [{ sessionId: 's1', turnId: 't' }]);
  assert.deepEqual(posted, [{ type: 'restoreResult', request: { turnId: 't' }, result: { restored: ['a.py'],
    conflicts: [{ path: 'b.py', reason: 'changed since the agent wrote it' }], turnId: 'r1', note: 'Only changes made by ToyCoder are undone.' } }]);
  const notices = calls.filter(([name]) => name === 'window.showInformationMessage').map(([, args]) => args);
  assert.deepEqual(notices, [["ToyCoder restored /ws/a.py on disk; the editor's unsaved changes were kept.", 'Compare']]);

  await controller.handle({ type: 'restore', request: { turnId: 't', paths: ['b.py'], force: true } });
  assert.deepEqual(d.restores[1], { sessionId: 's1', turnId: 't', paths: ['b.py'], force: true });

  d.onRestore = async () => { throw new Error("unknown checkpoint 'zz': no checkpoint has that turn id"); };
  posted.length = 0;
  await controller.handle({ type: 'restore', request: { turnId: 'zz' } });
  assert.deepEqual(posted, [{ type: 'restoreFailed', request: { turnId: 'zz' },
    message: "unknown checkpoint 'zz': no checkpoint has that turn id" }]);
});

test('a write on disk under a document with unsaved changes: one notice offering Compare, never an action that drops them', async () => {
  const { controller, daemons } = setup();
  await controller.prompt('change things');
  const dirty = { uri: Uri.file('/ws/a.py'), isDirty: true, version: 3 };
  (vscode.workspace as any).textDocuments = [dirty, { uri: Uri.file('/ws/b.py'), isDirty: false, version: 1 }];
  let answer!: (choice: string | undefined) => void;
  (vscode.window as any).showInformationMessage = (...args: unknown[]) => {
    calls.push(['window.showInformationMessage', args]);
    return new Promise((r) => { answer = r; });
  };
  const update = (u: unknown) => daemons[0].handlers.update({ sessionId: 's1', turnId: 't', update: u } as UpdateParams);
  // another editor's turn wrote both files on disk; its `changes` name them again, and a file that went
  // into that editor's buffer (inEditor: the disk untouched)
  update({ kind: 'tool_result', toolCallId: 'c1', status: 'completed', output: 'ok', changedPaths: ['/ws/a.py', '/ws/b.py'] });
  update({ kind: 'changes', files: [
    { path: 'a.py', status: 'modified', uri: 'file:///ws/a.py' },
    { path: 'c.py', status: 'modified', uri: 'file:///ws/c.py', inEditor: true }] });
  const notices = () => calls.filter(([name]) => name === 'window.showInformationMessage').map(([, args]) => args);
  assert.deepEqual(notices(), [["ToyCoder: /ws/a.py changed on disk; the editor's unsaved changes were kept.", 'Compare']]);
  assert.equal(calls.filter(([name]) => name === 'window.showWarningMessage').length, 0);
  answer('Compare');
  await new Promise((r) => setTimeout(r, 10));
  const compared = calls.filter(([name]) => name === 'commands.executeCommand').map(([, args]) => args);
  assert.deepEqual(compared, [['workbench.files.action.compareWithSaved', dirty.uri]]);
  // the same file written again once the document changed: told again
  dirty.version = 4;
  update({ kind: 'tool_result', toolCallId: 'c2', status: 'completed', output: 'ok', changedPaths: ['/ws/a.py'] });
  assert.equal(notices().length, 2);
});

test('no restore while a turn runs or before there is a session; a clicked file opens in the editor', async () => {
  const { controller, posted, daemons } = setup();
  await controller.handle({ type: 'restore', request: { turnId: 't' } });
  assert.deepEqual(posted.pop(), { type: 'restoreFailed', request: { turnId: 't' }, message: 'No session to restore.' });
  let release!: () => void;
  const gate = new Promise<void>((r) => { release = r; });
  await controller.ensureDaemon();
  daemons[0].onPrompt = async () => { await gate; return { turnId: 't', stopReason: 'end_turn', text: 'ok', usage }; };
  const turn = controller.prompt('busy');
  await new Promise((r) => setTimeout(r, 10));
  await controller.handle({ type: 'restore', request: { turnId: 't' } });
  assert.deepEqual(posted.pop(), { type: 'restoreFailed', request: { turnId: 't' }, message: 'A turn is running: stop it first.' });
  assert.deepEqual(daemons[0].restores, []);
  release();
  await turn;

  await controller.handle({ type: 'openFile', uri: 'file:///ws/src/a.py' });
  await controller.handle({ type: 'openFile', uri: 'https://example.invalid/x' });
  const opened = calls.filter(([name]) => name === 'window.showTextDocument');
  assert.equal(opened.length, 1);
  assert.equal((opened[0][1][0] as Uri).toString(), 'file:///ws/src/a.py');
});

test("a file's Diff on a changes card shows the daemon's diff of it in that turn; none before a session or for a binary", async () => {
  const { controller, daemons, texts } = setup();
  await controller.handle({ type: 'turnDiff', request: { turnId: 't-1', path: 'a.py' } });
  assert.deepEqual(texts, [], 'no session yet: nothing to ask');
  await controller.prompt('hi');
  const d = daemons[0];
  await controller.handle({ type: 'turnDiff', request: { turnId: 't-1', path: 'a.py' } });
  assert.deepEqual(d.diffs, [{ sessionId: 's1', turnId: 't-1', path: 'a.py' }]);
  assert.deepEqual(texts, [['a.py.diff', '--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-a\n+b\n']]);

  d.onDiff = async (p) => ({ path: p.path, status: 'created', diff: null });
  await controller.handle({ type: 'turnDiff', request: { turnId: 't-1', path: 'logo.png' } });
  assert.equal(texts.length, 1, 'no diff to show for a file that is not text');
  const infos = calls.filter(([name]) => name === 'window.showInformationMessage').map(([, args]) => String(args[0]));
  assert.deepEqual(infos, ['ToyCoder: logo.png is not text: no diff to show.']);

  d.onDiff = async () => { throw new Error("unknown checkpoint 't-1': that turn did not change b.py"); };
  await controller.handle({ type: 'turnDiff', request: { turnId: 't-1', path: 'b.py' } });
  const errors = calls.filter(([name]) => name === 'window.showErrorMessage').map(([, args]) => String(args[0]));
  assert.deepEqual(errors, ["ToyCoder: unknown checkpoint 't-1': that turn did not change b.py"]);
});

test('the view description shows the title and mode; session_info updates it; the mode picker calls setMode', async () => {
  const { controller, daemons, surface, types } = setup();
  const described: string[] = [];
  surface.setDescription = (text) => { described.push(text); };
  await controller.ensureDaemon();
  const d = daemons[0];
  d.newSession = async () => ({ ...session('s1'), title: '', mode: 'ask' });
  await controller.prompt('```py\nx\n```\nfix the bug please');
  assert.equal(described[described.length - 1], 'fix the bug please · Ask', 'the first prompt\'s line until the daemon titles it');

  d.handlers.update({ sessionId: 's1', turnId: '', update: { kind: 'session_info', session: { ...session('s1'), title: 'Fix the bug', mode: 'ask' } } });
  assert.equal(described[described.length - 1], 'Fix the bug · Ask');
  d.handlers.update({ sessionId: 'other', turnId: '', update: { kind: 'session_info', session: { ...session('other'), title: 'Not ours' } } });
  assert.equal(described[described.length - 1], 'Fix the bug · Ask');
  assert.ok(!types().includes('update'), 'session_info is the header\'s, not the conversation\'s');

  let offered: Array<{ label: string; description: string }> = [];
  (vscode.window as any).showQuickPick = async (items: Array<{ label: string; description: string }>) => {
    offered = items;
    return items[1];
  };
  await controller.pickMode();
  assert.deepEqual(offered.map((i) => [i.label, i.description]), [['Ask', 'current'], ['Read only', '']]);
  assert.equal(described[described.length - 1], 'Named · Read only');
});

test('the webview\'s header row gets the title and the mode\'s name, again on ready; its click sets the mode', async () => {
  const { controller, daemons, posted } = setup();
  const headers = () => posted.filter((m) => m.type === 'header');
  await controller.ensureDaemon();
  const d = daemons[0];
  d.newSession = async () => ({ ...session('s1'), title: '', mode: 'ask' });
  await controller.prompt('fix the bug');
  assert.deepEqual(headers().pop(), { type: 'header', title: 'fix the bug', mode: 'Ask' });
  d.handlers.update({ sessionId: 's1', turnId: '', update: { kind: 'session_info', session: { ...session('s1'), title: 'Fix it', mode: 'ask' } } });
  assert.deepEqual(headers().pop(), { type: 'header', title: 'Fix it', mode: 'Ask' });
  const before = headers().length;
  d.handlers.update({ sessionId: 's1', turnId: '', update: { kind: 'session_info', session: { ...session('s1'), title: 'Fix it', mode: 'ask' } } });
  assert.equal(headers().length, before, 'an unchanged header is not posted again');

  posted.length = 0;
  await controller.handle({ type: 'ready' }); // a new webview draws the header it missed, first
  assert.deepEqual(headers()[0], { type: 'header', title: 'Fix it', mode: 'Ask' });
  assert.deepEqual(posted.slice(0, 2).map((m) => m.type), ['daemon', 'header']);

  const set: string[] = [];
  const setMode = d.setMode.bind(d);
  d.setMode = async (sid: string, mode: string) => { set.push(`${sid} ${mode}`); return setMode(sid, mode); };
  (vscode.window as any).showQuickPick = async (items: Array<{ label: string }>) => items[1];
  await controller.handle({ type: 'pickMode' });
  assert.deepEqual(set, ['s1 read-only'], 'through toycoder/session/setMode');
  assert.deepEqual(headers().pop(), { type: 'header', title: 'Named', mode: 'Read only' });
});

test('turn_elsewhere (a turn in another editor) goes to the webview as such; its updates follow as updates', async () => {
  const { controller, daemons, posted } = setup();
  await controller.prompt('hi');
  const d = daemons[0];
  posted.length = 0;
  const elsewhere = { kind: 'turn_elsewhere', client: 'toycoder.nvim', running: true, prompt: 'explain' };
  d.handlers.update({ sessionId: 's1', turnId: 's1-2', update: elsewhere as unknown as UpdateParams['update'] });
  d.handlers.update({ sessionId: 's1', turnId: 's1-2', update: { kind: 'text_delta', text: 'It' } });
  d.handlers.update({ sessionId: 's1', turnId: 's1-2', update: { kind: 'turn_elsewhere', running: false } as unknown as UpdateParams['update'] });
  d.handlers.update({ sessionId: 'other', turnId: 'o-1', update: elsewhere as unknown as UpdateParams['update'] });
  assert.deepEqual(posted, [
    { type: 'elsewhere', client: 'toycoder.nvim', running: true, prompt: 'explain' },
    { type: 'update', params: { sessionId: 's1', turnId: 's1-2', update: { kind: 'text_delta', text: 'It' } } },
    { type: 'elsewhere', client: 'another editor', running: false, prompt: undefined },
  ]);
});

test('session_changed (another daemon\'s turn) reloads the transcript of the current session', async () => {
  const { controller, daemons, posted } = setup();
  await controller.prompt('hi');
  const d = daemons[0];
  const loads: string[] = [];
  const load = d.loadSession.bind(d);
  d.loadSession = async (id: string) => { loads.push(id); return load(id); };
  posted.length = 0;
  d.handlers.update({ sessionId: 's1', turnId: '', update: { kind: 'session_changed', transcript: [], reset: false } });
  d.handlers.update({ sessionId: 'other', turnId: '', update: { kind: 'session_changed', transcript: [], reset: false } });
  for (let i = 0; i < 50 && !posted.length; i++) await new Promise((r) => setTimeout(r, 5)); // poll, deadline
  assert.deepEqual(loads, ['s1']);
  assert.deepEqual(posted.map((m) => m.type), ['transcript']);
});

test('session_deleted (another editor deleted the current session) shows the daemon\'s line as a notice', async () => {
  const { controller, daemons, posted } = setup();
  await controller.prompt('hi');
  const d = daemons[0];
  posted.length = 0;
  const message = 'This session was deleted in another editor.';
  d.handlers.update({ sessionId: 'other', turnId: '', update: { kind: 'session_deleted', message } });
  d.handlers.update({ sessionId: 's1', turnId: '', update: { kind: 'session_deleted', message } });
  assert.deepEqual(posted, [{ type: 'notice', level: 'error', text: message }]);
});

test('`@` in the prompt box: the daemon completes the mention for the session', async () => {
  const { controller, posted, daemons } = setup();
  await controller.handle({ type: 'mentions', prefix: 'cal' }); // no daemon yet: nothing is started for it
  assert.equal(daemons.length, 0);
  await controller.handle({ type: 'prompt', text: 'hi' });
  posted.length = 0;
  await controller.handle({ type: 'mentions', prefix: 'cal' });
  assert.deepEqual(daemons[0].mentionAsks, [['s1', 'cal']]);
  assert.deepEqual(posted, [{ type: 'mentionItems', prefix: 'cal',
    items: [{ label: 'calc.py', kind: 'file', uri: 'file:///ws/calc.py' }] }]);
});

test('Add Selection and a pasted image are chips until the next prompt carries them', async () => {
  const { controller, posted, daemons } = setup();
  const editor = {
    selection: { isEmpty: false, start: { line: 1, character: 0 }, end: { line: 3, character: 0 } },
    document: { uri: Uri.file('/ws/calc.py'), getText: () => 'b = 2\nc = 3\n' },
  } as unknown as vscode.TextEditor;
  await controller.addSelection(editor);
  await controller.handle({ type: 'attachImage', name: 'shot.png', image: { mimeType: 'image/png', data: 'iVBO' } });
  await controller.handle({ type: 'attachImage', name: 'other.png', image: { mimeType: 'image/png', data: 'AAAA' } });
  await controller.handle({ type: 'removeChip', index: 2 });
  assert.deepEqual(posted.filter((m) => m.type === 'chips').at(-1), { type: 'chips', labels: ['/ws/calc.py:2-3', 'shot.png'] });
  await controller.handle({ type: 'prompt', text: 'look' });
  assert.deepEqual(daemons[0].contexts[0], [
    { type: 'selection', uri: 'file:///ws/calc.py', text: 'b = 2\nc = 3\n',
      range: { start: { line: 1, character: 0 }, end: { line: 3, character: 0 } } },
    { type: 'image', mimeType: 'image/png', data: 'iVBO' }]);
  assert.deepEqual(posted.filter((m) => m.type === 'chips').at(-1), { type: 'chips', labels: [] });
  await controller.handle({ type: 'prompt', text: 'again' });
  assert.deepEqual(daemons[0].contexts[1], []); // sent once
});
