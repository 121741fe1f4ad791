/**
 * The daemon not found (issue 31): the panel offers "Install with pipx", "Install with uv" (run in a
 * terminal) or "Set path" (toycoder.daemon.command); a daemon of another protocol version is said clearly.
 */
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { ChatController } from '../../src/controller';
import { DaemonNotFound, protocolMismatch } from '../../src/daemon';
import { offerInstall } from '../../src/install';
import { PROTOCOL_VERSION } from '../../src/shared/protocol';
import { calls, resetStub, settings } from '../../stubs/vscode';

beforeEach(() => resetStub());

function answer(pick: string | undefined): void {
  (vscode.window as any).showErrorMessage = async (_message: string, ..._items: string[]) => pick;
}

test('a daemon not found offers pipx, uv and a path, and runs the install in a terminal', async () => {
  const offered: string[][] = [];
  (vscode.window as any).showErrorMessage = async (message: string, ...items: string[]) => {
    offered.push([message, ...items]);
    return 'Install with pipx';
  };
  const logged: string[] = [];
  const controller = new ChatController({
    root: undefined, log: (line) => { logged.push(line); }, showDiff: async () => undefined, showText: async () => undefined,
    surface: { post: () => undefined, reveal: async () => undefined, hide: async () => undefined },
    startDaemon: async () => { throw new DaemonNotFound('toycoder-daemon'); },
  });
  await controller.prompt('hi');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(offered[0].slice(1), ['Install with pipx', 'Install with uv', 'Set path']);
  assert.match(offered[0][0], /"toycoder-daemon" was not found/);
  const sent = calls.filter(([name]) => name === 'terminal.sendText').map(([, args]) => args[0]);
  assert.deepEqual(sent, ['pipx install toycoder-daemon']);
  assert.ok(logged.includes('[toycoder-vscode] pipx install toycoder-daemon'));
});

test('install with uv runs uv tool install', async () => {
  answer('Install with uv');
  assert.equal(await offerInstall('toycoder-daemon'), 'uv tool install toycoder-daemon');
  assert.deepEqual(calls.filter(([n]) => n === 'terminal.sendText').map(([, a]) => a[0]), ['uv tool install toycoder-daemon']);
});

test('set path writes toycoder.daemon.command for the user', async () => {
  answer('Set path');
  (vscode.window as any).showInputBox = async () => '/opt/tc/bin/toycoder-daemon';
  await offerInstall('toycoder-daemon');
  assert.deepEqual(settings['daemon.command'], ['/opt/tc/bin/toycoder-daemon']);
  const update = calls.find(([n]) => n === 'configuration.update');
  assert.equal(update?.[1][2], vscode.ConfigurationTarget.Global);
});

test('dismissed, nothing is run or written', async () => {
  answer(undefined);
  assert.equal(await offerInstall('toycoder-daemon'), undefined);
  assert.equal(calls.filter(([n]) => n === 'window.createTerminal' || n === 'configuration.update').length, 0);
});

test('a protocol version mismatch is said with both versions and what to do', () => {
  const said = protocolMismatch(PROTOCOL_VERSION + 1);
  assert.match(said, new RegExp(`protocol version ${PROTOCOL_VERSION + 1}, this extension ${PROTOCOL_VERSION}`));
  assert.match(said, /do not match/);
  assert.match(said, /pipx upgrade toycoder-daemon/);
});
