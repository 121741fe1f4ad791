/**
 * The slow tier (real VS Code in code-server, see codeserver.test.ts): `@` completion in the chat
 * panel's input. Typing `@cal` offers calc.py (toycoder/mentions/complete, as rg lists the
 * workspace); picking it with the mouse puts `@calc.py` in the prompt, and the prompt sent carries
 * the file's content to the model (the scripted server checks the request it gets).
 */

import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chatFrame, runCommand, startCodeServer } from '../helpers/codeServer';
import { FakeLlm, makeWorkspace, startFakeLlm, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
});

test('real VS Code: @cal in the chat input offers calc.py; picked and sent, its content reaches the model', { timeout: 25 * 60 * 1000 }, async () => {
  const ws = makeWorkspace('toycoder-codeserver-mentions-');
  // a marker only the file holds: the model's request has it only if the file was attached
  writeFileSync(join(ws.root, 'calc.py'), 'def calc(x):\n    return x * 7  # SEVEN_TIMES_MARKER\n');
  writeFileSync(join(ws.root, 'src', 'calendar_notes.md'), 'not picked\n');
  const llm: FakeLlm = await startFakeLlm(ws.dir, [
    { text: 'It multiplies by seven.', expect: { last_user_contains: 'SEVEN_TIMES_MARKER' } },
  ]);
  cleanups.push(() => llm.stop());
  // ---- code-server and the browser -----------------------------------------------------------
  const server = await startCodeServer(ws, writeConfig(ws, llm.baseUrl));
  cleanups.push(() => server.stop());
  const { page, shot } = server;
  try {
    await runCommand(page, 'ToyCoder: Open Chat');
    const frame = await chatFrame(page);
    await frame.waitForSelector('body[data-daemon="ready"]', { timeout: 60000 }); // the panel heard the daemon is ready
    const prompt = frame.locator('#prompt');
    await prompt.click();
    await prompt.pressSequentially('What does @cal', { delay: 40 }); // one completion request a keystroke
    const item = frame.locator('#completions li.completion', { hasText: '@calc.py' });
    await item.waitFor({ timeout: 30000 });
    const offered = await frame.locator('#completions li.completion .completion-usage').allTextContents();
    assert.equal(offered[0], '@calc.py', `calc.py first among ${JSON.stringify(offered)}`);
    await shot('code-server-mention-completion.png');
    await item.click();
    assert.equal(await prompt.inputValue(), 'What does @calc.py ');
    assert.ok(await frame.locator('#completions').isHidden(), 'the list closes once picked');
    await prompt.pressSequentially('do?');
    await prompt.press('Enter');

    await frame.locator('.assistant .markdown', { hasText: 'It multiplies by seven.' }).waitFor({ timeout: 60000 });
    assert.equal(llm.requestCount(), 1);
    assert.deepEqual(llm.violations(), [], 'the model request holds calc.py\'s content');
    await shot('code-server-mention-sent.png');
  } catch (e) {
    await shot('code-server-mention-failure.png');
    process.stdout.write(`# code-server log:\n${server.log().split('\n').slice(-40).map((l) => `# ${l}`).join('\n')}\n`);
    throw e;
  }
});
