/**
 * The mode picker's and the header's daemon side, against the real daemon and the scripted model:
 * initialize's availableModes, setMode and its `session_info` update, `/title` pushed as
 * `session_info`, a `plan` update, and a reloaded turn's stopReason and usage, and its plan.
 */

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { DaemonClient, DaemonHandlers } from '../../src/daemon';
import type { UpdateParams } from '../../src/shared/protocol';
import { DAEMON_COMMAND, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

test('modes, titles and plans as the header and the plan card get them', async () => {
  const ws = makeWorkspace();
  const llm = await startFakeLlm(ws.dir, [
    { tool_calls: [{ name: 'update_plan', arguments: { entries: [
      { content: 'read calc.py', priority: 'high', status: 'in_progress' }] } }] },
    { text: 'Planned.' },
  ]);
  cleanups.push(() => llm.stop());
  const updates: UpdateParams[] = [];
  const handlers: DaemonHandlers = {
    update: (p) => updates.push(p),
    requestPermission: async () => ({ decision: 'reject' }),
    askUser: async () => ({ cancelled: true }),
    progress: () => undefined,
    stderr: () => undefined,
    exit: () => undefined,
  };
  const client = await DaemonClient.start({
    command: DAEMON_COMMAND, root: ws.root, configPath: writeConfig(ws, llm.baseUrl), env: ws.env, logLevel: 'INFO',
  }, handlers);
  cleanups.push(() => client.dispose());
  assert.deepEqual(client.availableModes.map((m) => m.id), ['ask', 'accept-edits', 'read-only']);
  assert.ok(client.availableModes.every((m) => m.name && m.description));

  const session = await client.newSession();
  assert.equal(session.mode, 'ask');
  const sid = session.sessionId;
  const result = await client.prompt(sid, 'make a plan');
  assert.equal(result.stopReason, 'end_turn', llm.log());
  const plans = updates.filter((u) => u.update.kind === 'plan').map((u) => u.update);
  assert.deepEqual(plans, [{ kind: 'plan', entries: [{ content: 'read calc.py', priority: 'high', status: 'in_progress' }] }]);

  const info = await client.setMode(sid, 'read-only');
  assert.equal(info.mode, 'read-only');
  await client.prompt(sid, '/title Calc plan');
  const infos = await waitFor(() => {
    const got = updates.filter((u) => u.update.kind === 'session_info').map((u) => u.update.kind === 'session_info' && u.update.session);
    return got.some((s) => s && s.title === 'Calc plan') ? got : undefined;
  }, 'the session_info of /title');
  assert.ok(infos.some((s) => s && s.mode === 'read-only'), 'setMode is pushed as session_info too');

  const loaded = await client.loadSession(sid);
  assert.equal(loaded.session.title, 'Calc plan');
  assert.equal(loaded.session.mode, 'read-only');
  const first = loaded.transcript.find((e) => e.role === 'user');
  assert.equal(first?.stopReason, 'end_turn');
  assert.equal(first?.usage?.totalTokens, result.usage.totalTokens, 'the footer a reload shows is the live one');
  assert.deepEqual(loaded.transcript.at(-1), { role: 'plan', text: '', entries: plans[0].kind === 'plan' ? plans[0].entries : [] },
    'the session\'s plan comes back with it, last');
});
