import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { askPermission, askUser, askWorkspaceTrust, permissionDetail } from '../../src/permission';
import type { PermissionParams, WorkspaceTrustParams } from '../../src/shared/protocol';
import { CancellationTokenSource, calls, resetStub } from '../../stubs/vscode';

const diffRequest: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_1', tool: 'write_file', level: 'sensitive',
  title: 'write_file README.md', arguments: { path: 'README.md', content: 'x' },
  preview: { kind: 'diff', path: 'README.md', diff: '--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-old\n+new\n' },
};
const commandRequest: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_2', tool: 'run_command', level: 'dangerous',
  title: 'run_command pytest -q', arguments: { command: 'pytest -q' },
  preview: { kind: 'command', command: 'pytest -q', cwd: '/work/proj' },
};

function answers(...replies: Array<string | undefined>) {
  const queue = [...replies];
  (vscode.window as any).showWarningMessage = async (...args: unknown[]) => {
    calls.push(['window.showWarningMessage', args]);
    return queue.shift();
  };
}

const token = () => new CancellationTokenSource().token as unknown as vscode.CancellationToken;

beforeEach(() => resetStub());

test('a native modal with the three decisions and Show diff', async () => {
  answers('Allow once');
  const result = await askPermission(diffRequest, token(), async () => assert.fail('no diff asked'));
  assert.deepEqual(result, { decision: 'allow_once' });
  const [, args] = calls.find(([n]) => n === 'window.showWarningMessage')!;
  assert.equal(args[0], 'ToyCoder wants to run write_file README.md');
  assert.deepEqual((args[1] as { modal: boolean }).modal, true);
  assert.deepEqual(args.slice(2), ['Allow once', 'Always allow', 'Deny', 'Show diff']);
});

test('Show diff opens the diff, then asks again', async () => {
  answers('Show diff', 'Always allow');
  const shown: unknown[] = [];
  const result = await askPermission(diffRequest, token(), async (p) => { shown.push(p); });
  assert.deepEqual(result, { decision: 'allow_always' });
  assert.deepEqual(shown, [diffRequest.preview]);
  assert.equal(calls.filter(([n]) => n === 'window.showWarningMessage').length, 2);
});

test('Deny, and dismissing the modal, are a rejection', async () => {
  answers('Deny');
  assert.deepEqual(await askPermission(diffRequest, token(), async () => undefined), { decision: 'reject' });
  answers(undefined);
  assert.deepEqual(await askPermission(diffRequest, token(), async () => undefined), { decision: 'reject' });
});

test('commands show the command and its directory, and no Show diff', async () => {
  answers('Allow once');
  await askPermission(commandRequest, token(), async () => undefined);
  const [, args] = calls.find(([n]) => n === 'window.showWarningMessage')!;
  const detail = (args[1] as { detail: string }).detail;
  assert.match(detail, /Command: pytest -q/);
  assert.match(detail, /Directory: \/work\/proj/);
  assert.deepEqual(args.slice(2), ['Allow once', 'Always allow', 'Deny']);
  assert.match(permissionDetail(diffRequest), /README\.md \(\+1 −1 lines\)/);
});

test('a cancelled request stops waiting for the modal', async () => {
  (vscode.window as any).showWarningMessage = () => new Promise(() => undefined); // never answered
  const source = new CancellationTokenSource();
  const pending = askPermission(diffRequest, source.token as unknown as vscode.CancellationToken, async () => undefined);
  setTimeout(() => source.cancel(), 10);
  assert.deepEqual(await pending, { decision: 'reject' });
});

test('askUser: QuickPick for options, input box for free text, dismiss = cancelled', async () => {
  let picked: unknown;
  (vscode.window as any).showQuickPick = async (items: string[], options: { placeHolder: string }) => {
    picked = [items, options.placeHolder];
    return items[1];
  };
  assert.deepEqual(await askUser({ sessionId: 's', turnId: 't', question: 'Which?', options: ['a', 'b'] }, token()),
    { answer: 'b' });
  assert.deepEqual(picked, [['a', 'b'], 'Which?']);
  (vscode.window as any).showInputBox = async (options: { prompt: string }) => `typed for ${options.prompt}`;
  assert.deepEqual(await askUser({ sessionId: 's', turnId: 't', question: 'Name?' }, token()), { answer: 'typed for Name?' });
  (vscode.window as any).showInputBox = async () => undefined;
  assert.deepEqual(await askUser({ sessionId: 's', turnId: 't', question: 'Name?' }, token()), { cancelled: true });
});

test('askUser passes the token on and a cancelled question answers cancelled', async () => {
  let received: unknown;
  (vscode.window as any).showInputBox = (_o: unknown, t: unknown) => {
    received = t;
    return new Promise(() => undefined);
  };
  const source = new CancellationTokenSource();
  const pending = askUser({ sessionId: 's', turnId: 't', question: 'Wait?' }, source.token as unknown as vscode.CancellationToken);
  source.cancel();
  assert.deepEqual(await pending, { cancelled: true });
  assert.equal(received, source.token);
});

const trustRequest: WorkspaceTrustParams = {
  root: '/w', settingsPath: '/w/.toycoder/settings.yaml',
  adds: { hooks: ['make lint'], mcpServers: ['npx srv'], allow: ['run_command(make *)'],
    agents: ['repo_planner: tools none; model fast'] },
};

test('workspace trust: a modal with Trust, Once and Deny listing what the file adds', async () => {
  answers('Trust');
  assert.deepEqual(await askWorkspaceTrust(trustRequest, token()), { decision: 'trust' });
  const [, args] = calls.find(([n]) => n === 'window.showWarningMessage')!;
  assert.equal((args[1] as { modal: boolean }).modal, true);
  assert.deepEqual(args.slice(2), ['Trust', 'Once', 'Deny']);
  const detail = (args[1] as { detail: string }).detail;
  assert.ok(detail.includes('hook: make lint') && detail.includes('MCP server: npx srv')
    && detail.includes('allow rule: run_command(make *)')
    && detail.includes('agent: repo_planner: tools none; model fast'), detail);
  answers('Once');
  assert.deepEqual(await askWorkspaceTrust(trustRequest, token()), { decision: 'once' });
  answers(undefined);
  assert.deepEqual(await askWorkspaceTrust(trustRequest, token()), { decision: 'deny' });
});
