/**
 * Changes and undo against the real daemon (issue 11): a turn that writes a file ends with a
 * `changes` update the changes card can be built from, and the card's Undo / Force requests
 * (DaemonClient.restoreCheckpoint) put the file back; a file changed outside the agent is a
 * conflict until forced.
 */

import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DaemonClient } from '../../src/daemon';
import { ChangesUpdate, isChangesUpdate } from '../../src/shared/checkpoints';
import type { UpdateParams } from '../../src/shared/protocol';
import { DAEMON_COMMAND, makeWorkspace, startFakeLlm, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const write = (path: string, content: string) => ({ tool_calls: [{ name: 'write_file', arguments: { path, content } }] });

async function start(replies: unknown[]) {
  const ws = makeWorkspace();
  const llm = await startFakeLlm(ws.dir, replies);
  cleanups.push(() => llm.stop());
  const updates: UpdateParams[] = [];
  const stderr: string[] = [];
  const client = await DaemonClient.start({ command: DAEMON_COMMAND, root: ws.root, configPath: writeConfig(ws, llm.baseUrl),
    env: ws.env }, {
    update: (p) => updates.push(p),
    requestPermission: async () => ({ decision: 'allow_once' }),
    askUser: async () => ({ cancelled: true }),
    stderr: (line) => stderr.push(line),
  });
  cleanups.push(() => client.dispose());
  const changes = (turnId: string): { turnId: string; update: ChangesUpdate } | undefined => {
    const found = updates.find((u) => u.turnId === turnId && isChangesUpdate(u.update));
    if (!found) return undefined;
    return { turnId: found.turnId, update: found.update as ChangesUpdate };
  };
  const diag = () => `\n--- daemon stderr ---\n${stderr.slice(-30).join('\n')}\n--- fake_llm ---\n${llm.log()}`;
  return { ws, client, changes, diag };
}

test('a turn that writes ends with a changes update; Undo restores it; a changed file is a conflict until forced', async () => {
  const { ws, client, changes, diag } = await start([
    write('README.md', '# Demo\nA bigger project.\nWith more.\n'), { text: 'Written.' },
    write('src/app.py', 'def add(a, b):\n    return b + a\n'), { text: 'Swapped.' },
  ]);
  const readme = join(ws.root, 'README.md');
  const app = join(ws.root, 'src', 'app.py');
  const session = await client.newSession();

  const first = await client.prompt(session.sessionId, 'grow the readme');
  assert.equal(first.stopReason, 'end_turn', diag());
  const one = changes(first.turnId);
  assert.ok(one, `no changes update for the turn${diag()}`);
  assert.deepEqual(one.update.files.map((f) => [f.path, f.status, f.added, f.removed]), [['README.md', 'modified', 2, 1]]);
  assert.match(one.update.files[0].uri, /^file:\/\/.*\/README\.md$/);

  const undone = await client.restoreCheckpoint({ sessionId: session.sessionId, turnId: one.turnId });
  assert.deepEqual(undone.restored, ['README.md'], JSON.stringify(undone));
  assert.deepEqual(undone.conflicts, []);
  assert.equal(readFileSync(readme, 'utf8'), '# Demo\nA tiny project.\n');

  const second = await client.prompt(session.sessionId, 'swap the operands');
  const two = changes(second.turnId);
  assert.ok(two, `no changes update for the second turn${diag()}`);
  writeFileSync(app, 'def add(a, b):\n    return b + a  # mine\n'); // the person edits it afterwards
  const refused = await client.restoreCheckpoint({ sessionId: session.sessionId, turnId: two.turnId });
  assert.deepEqual(refused.restored, []);
  assert.deepEqual(refused.conflicts.map((c) => c.path), ['src/app.py'], JSON.stringify(refused));
  assert.ok(refused.conflicts[0].reason.length > 0);
  assert.equal(readFileSync(app, 'utf8'), 'def add(a, b):\n    return b + a  # mine\n', 'a conflict is not overwritten');

  const forced = await client.restoreCheckpoint({ sessionId: session.sessionId, turnId: two.turnId, paths: ['src/app.py'], force: true });
  assert.deepEqual(forced.restored, ['src/app.py'], JSON.stringify(forced));
  assert.equal(readFileSync(app, 'utf8'), 'def add(a, b):\n    return a + b\n');
});

test('/undo typed in the chat is a slash command: the file goes back and its turn reports the changes', async () => {
  const { ws, client, changes, diag } = await start([write('src/new.py', 'print("new")\n'), { text: 'Created.' }]);
  const created = join(ws.root, 'src', 'new.py');
  const session = await client.newSession();
  const first = await client.prompt(session.sessionId, 'add a file');
  assert.deepEqual(changes(first.turnId)?.update.files.map((f) => [f.path, f.status]), [['src/new.py', 'created']], diag());
  const undo = await client.prompt(session.sessionId, '/undo');
  assert.equal(undo.stopReason, 'command', diag());
  assert.equal(existsSync(created), false, `${undo.text}${diag()}`);
  assert.deepEqual(changes(undo.turnId)?.update.files.map((f) => [f.path, f.status]), [['src/new.py', 'deleted']], diag());
});
