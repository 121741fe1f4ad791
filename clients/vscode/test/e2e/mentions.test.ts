/**
 * `@` mentions through the extension's daemon client (src/daemon.ts) against the real daemon and the
 * scripted model server (issue 29): toycoder/mentions/complete lists calc.py for `cal`, and a prompt
 * that mentions it (whole, or a line range) sends the file's text in the model request.
 */

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DaemonClient } from '../../src/daemon';
import { DAEMON_COMMAND, makeWorkspace, startFakeLlm, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const CALC = 'def average(numbers):\n    return sum(numbers) / len(numbers)\n\n\ndef total(numbers):\n    return sum(numbers)\n';

test('@cal completes to calc.py, and a prompt mentioning it carries the file to the model', async () => {
  const ws = makeWorkspace();
  writeFileSync(join(ws.root, 'calc.py'), CALC);
  const llm = await startFakeLlm(ws.dir, [
    { text: 'It averages.', expect: { last_user_contains: 'Attached file calc.py: lines 1-6 of 6\n     1\tdef average(numbers):' } },
    { text: 'It sums.', expect: { last_user_contains: 'Attached file calc.py: lines 5-6 of 6\n     5\tdef total(numbers):' } },
  ]);
  cleanups.push(() => llm.stop());
  const stderr: string[] = [];
  const client = await DaemonClient.start({
    command: DAEMON_COMMAND, root: ws.root, configPath: writeConfig(ws, llm.baseUrl), env: ws.env, logLevel: 'INFO',
  }, {
    update: () => undefined, requestPermission: async () => ({ decision: 'reject' }),
    askUser: async () => ({ cancelled: true }), stderr: (line) => stderr.push(line),
  });
  cleanups.push(() => client.dispose());
  const session = await client.newSession();

  const items = await client.completeMentions(session.sessionId, 'cal', 30);
  const calc = items.find((i) => i.label === 'calc.py');
  assert.ok(calc, `calc.py not offered: ${JSON.stringify(items)}`);
  assert.equal(calc.kind, 'file');
  assert.ok(items.every((i) => i.label !== 'README.md'), 'the prefix filters');

  const first = await client.prompt(session.sessionId, `explain @${calc.label} please`);
  assert.equal(first.stopReason, 'end_turn', stderr.slice(-20).join('\n'));
  // a range: only those lines go
  const second = await client.prompt(session.sessionId, 'and @calc.py#L5-6 ?');
  assert.equal(second.stopReason, 'end_turn', stderr.slice(-20).join('\n'));
  assert.equal(llm.requestCount(), 2);
  assert.deepEqual(llm.violations(), [], llm.log());
});
