/**
 * The daemon on another machine (issue 31, docs/remote.md): `toycoder.daemon.command` is the ssh-like
 * wrapper (tests/ssh_like, made by tests/remote_host.py): the daemon has its own HOME, config, key and
 * data, and its own copy of the workspace at the same absolute path. A prompt, an approved write and
 * the Undo of the changes card (DaemonClient.restoreCheckpoint) land in the remote copy only.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type * as vscode from 'vscode';
import { DaemonClient } from '../../src/daemon';
import { daemonCommand } from '../../src/extension';
import { isChangesUpdate } from '../../src/shared/checkpoints';
import type { UpdateParams } from '../../src/shared/protocol';
import { PYTHON, REPO_ROOT, makeWorkspace, startFakeLlm } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

test('through an ssh-like command: a prompt, a write and Undo go to the remote copy and its data dir', async () => {
  const ws = makeWorkspace();
  const grown = '# Demo\nA bigger project.\n';
  const llm = await startFakeLlm(ws.dir, [
    { text: 'Hello from there.' },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'README.md', content: grown } }] }, { text: 'Written.' },
  ]);
  cleanups.push(() => llm.stop());
  const host = JSON.parse(execFileSync(PYTHON, [join(REPO_ROOT, 'tests', 'remote_host.py'), join(ws.dir, 'host'), ws.root,
    llm.baseUrl], { encoding: 'utf8' })) as { command: string[]; copy: string; data: string };
  // what the extension makes of the setting
  const command = daemonCommand({ get: () => host.command } as unknown as vscode.WorkspaceConfiguration);
  assert.deepEqual(command, host.command);

  const updates: UpdateParams[] = [];
  const stderr: string[] = [];
  // no configPath: the remote daemon reads its own config
  const client = await DaemonClient.start({ command, root: ws.root, env: ws.env }, {
    update: (p) => updates.push(p),
    requestPermission: async () => ({ decision: 'allow_once' }),
    askUser: async () => ({ cancelled: true }),
    stderr: (line) => stderr.push(line),
  });
  cleanups.push(() => client.dispose());
  const diag = () => `\n--- daemon stderr ---\n${stderr.slice(-30).join('\n')}\n--- fake_llm ---\n${llm.log()}`;
  const readme = join(ws.root, 'README.md');
  const remoteReadme = join(host.copy, 'README.md');
  const session = await client.newSession();

  const hello = await client.prompt(session.sessionId, 'hi');
  assert.equal(hello.stopReason, 'end_turn', diag());
  assert.equal(hello.text, 'Hello from there.', diag());
  // its sessions are kept over there (the remote's XDG_DATA_HOME), not in the local data dir
  assert.ok(readdirSync(host.data, { recursive: true }).some((f) => String(f).endsWith('.jsonl')), diag());
  assert.equal(existsSync(ws.dataDir), false, 'the local data dir was used');

  const write = await client.prompt(session.sessionId, 'grow the readme');
  assert.ok(updates.some((u) => u.turnId === write.turnId && isChangesUpdate(u.update)), `no changes update${diag()}`);
  assert.equal(readFileSync(remoteReadme, 'utf8'), grown, diag());
  assert.equal(readFileSync(readme, 'utf8'), '# Demo\nA tiny project.\n', 'the write landed in the local file');

  const undone = await client.restoreCheckpoint({ sessionId: session.sessionId, turnId: write.turnId });
  assert.deepEqual(undone.restored, ['README.md'], JSON.stringify(undone));
  assert.equal(readFileSync(remoteReadme, 'utf8'), '# Demo\nA tiny project.\n');
  assert.equal(readFileSync(readme, 'utf8'), '# Demo\nA tiny project.\n');
});
