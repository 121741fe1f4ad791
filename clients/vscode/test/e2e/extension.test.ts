/**
 * The whole extension host (activate(), with the stub `vscode` module and a fake webview) against the
 * real daemon: a prompt from the webview, the permission card it gets, Open diff, the badge and the
 * status-bar item while the view is hidden, then Accept from the diff editor's title bar command:
 * the file is written, the proposal's tab closes, the context key goes back to false.
 */

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import * as vscode from 'vscode';
import { activate, deactivate } from '../../src/extension';
import type { ToWebview } from '../../src/shared/messages';
import { TabInputTextDiff, Uri, calls, openTabs, settings, statusBarItems } from '../../stubs/vscode';
import { DAEMON_COMMAND, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const CONTENT = Array.from({ length: 120 }, (_, i) => `ROWS.append(${i + 1})`).join('\n') + '\n';

function registered(command: string): (...args: unknown[]) => Promise<unknown> {
  const call = calls.find(([n, a]) => n === 'commands.registerCommand' && a[0] === command);
  assert.ok(call, `${command} is registered`);
  return call[1][1] as (...args: unknown[]) => Promise<unknown>;
}

test('activate(): a card in the chat, the badge while hidden, Accept in the diff editor writes and closes', async () => {
  const ws = makeWorkspace();
  const llm = await startFakeLlm(ws.dir, [
    { tool_calls: [{ name: 'write_file', arguments: { path: 'src/table.py', content: CONTENT } }] },
    { text: 'written' },
  ]);
  cleanups.push(() => llm.stop());
  // the daemon inherits this process's environment: keep it in the test's workspace
  Object.assign(process.env, { TOYCODER_DATA_DIR: ws.env.TOYCODER_DATA_DIR, HOME: ws.env.HOME, XDG_CONFIG_HOME: ws.env.XDG_CONFIG_HOME });
  for (const k of ['TOYCODER_CONFIG', 'OPENAI_API_KEY', 'OPENAI_BASE_URL']) delete process.env[k];
  settings['daemon.command'] = DAEMON_COMMAND;
  settings.configPath = writeConfig(ws, llm.baseUrl);
  (vscode.workspace as { workspaceFolders: unknown }).workspaceFolders = [{ uri: Uri.file(ws.root), name: 'ws', index: 0 }];

  const subscriptions: Array<{ dispose(): unknown }> = [];
  /** The ToyCoder output channel (the daemon's stderr). */
  const log = () => (subscriptions.find((s) => (s as { name?: string }).name === 'ToyCoder') as unknown as { lines: string[] }).lines;
  activate({ subscriptions, extensionUri: Uri.file('/ext'), extension: { packageJSON: { version: '0.0.0' } } } as unknown as vscode.ExtensionContext);
  cleanups.push(async () => {
    await deactivate();
    for (const s of subscriptions) s.dispose();
  });

  // the view, as VS Code resolves it
  const [, [, provider]] = calls.find(([n]) => n === 'window.registerWebviewViewProvider')! as [string, [string, vscode.WebviewViewProvider]];
  const posted: ToWebview[] = [];
  let fromWebview!: (m: unknown) => void;
  let visibilityChanged!: () => void;
  const view = {
    visible: true,
    badge: undefined as vscode.ViewBadge | undefined,
    webview: {
      options: {}, html: '', cspSource: 'https://webview.test',
      asWebviewUri: (u: Uri) => u,
      postMessage: async (m: ToWebview) => { posted.push(m); return true; },
      onDidReceiveMessage: (l: (m: unknown) => void) => { fromWebview = l; return { dispose() {} }; },
    },
    onDidDispose: () => ({ dispose() {} }),
    onDidChangeVisibility: (l: () => void) => { visibilityChanged = l; return { dispose() {} }; },
    show: () => undefined,
  };
  await provider.resolveWebviewView(view as unknown as vscode.WebviewView, {} as vscode.WebviewViewResolveContext,
    {} as vscode.CancellationToken);
  fromWebview({ type: 'ready' });
  await waitFor(() => posted.some((m) => m.type === 'daemon' && m.state === 'ready'), 'the daemon', 30000);

  fromWebview({ type: 'prompt', text: 'write the table' });
  const card = await waitFor(() => posted.find((m) => m.type === 'permission'), 'the permission card', 30000);
  assert.ok(card.type === 'permission');
  assert.equal(calls.some(([n]) => n === 'window.showWarningMessage'), false, 'no modal');

  fromWebview({ type: 'openDiff', id: card.id });
  const diffCall = await waitFor(() => calls.find(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff'), 'the diff editor');
  const [, left, right, title] = diffCall[1] as [string, Uri, Uri, string];
  assert.match(title, /src\/table\.py ↔ proposed by ToyCoder/);
  openTabs.push({ label: title, input: new TabInputTextDiff(left, right) }); // what VS Code would show
  await new Promise((r) => setImmediate(r)); // the rest of "Open diff" (remembering its tab) is promise callbacks

  // the person looks elsewhere: badge and status-bar item
  view.visible = false;
  visibilityChanged();
  assert.equal(view.badge?.value, 1);
  const item = statusBarItems.find((i) => i.command === 'toycoder.showPendingReview');
  assert.ok(item?.visible, 'the status-bar item shows');
  assert.match(item.text, /review 1 request/);
  const contexts = () => calls.filter(([n, a]) => n === 'commands.executeCommand' && a[0] === 'setContext').map(([, a]) => a[2]);
  assert.deepEqual(contexts(), [true]);
  assert.equal(existsSync(join(ws.root, 'src', 'table.py')), false, 'pending: nothing written');

  await registered('toycoder.acceptProposal')(right);
  await waitFor(() => posted.some((m) => m.type === 'turnEnded'), 'the end of the turn', 30000)
    .catch((e: Error) => assert.fail(`${e.message}: ${JSON.stringify(posted.map((m) => m.type))}\n${log().join('\n')}`));
  assert.equal(readFileSync(join(ws.root, 'src', 'table.py'), 'utf8'), CONTENT);
  assert.deepEqual(posted.find((m) => m.type === 'permissionDecided'),
    { type: 'permissionDecided', id: card.id, outcome: 'allow_once', source: 'editor' });
  assert.deepEqual(openTabs, [], 'the proposal tab closed');
  assert.equal(view.badge, undefined);
  assert.equal(item.visible, false);
  assert.deepEqual(contexts(), [true, false]);

  // the title bar of a decided proposal does nothing but say so
  await registered('toycoder.rejectProposal')(right);
  assert.ok(calls.some(([n, a]) => n === 'window.showInformationMessage' && /no longer pending/.test(String(a[0]))));
  assert.deepEqual(llm.violations(), []);
});
