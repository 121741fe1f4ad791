/**
 * The chat webview in headless Chromium, with a stub acquireVsCodeApi: streamed Markdown, escaped
 * HTML, tool cards updated in place (sub-agents nested), retry/compaction/usage, the prompt box
 * (Enter, Shift+Enter, slash completion), Stop, the daemon-exited banner, transcripts, and a
 * screenshot kept as an artifact.
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ToWebview } from '../../src/shared/messages';
import type { Update } from '../../src/shared/protocol';
import { useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();

const upd = (update: Update, parentToolCallId?: string): ToWebview =>
  ({ type: 'update', params: { sessionId: 's', turnId: 's-1', update, ...(parentToolCallId ? { parentToolCallId } : {}) } });
const text = (t: string, parent?: string) => upd({ kind: 'text_delta', text: t }, parent);
const usage = { promptTokens: 1234, completionTokens: 56, totalTokens: 1290 };

test('streamed Markdown renders while it streams', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'Explain add()' });
  await c.send(text('Here is **bo'));
  await c.send(text('ld** text and `inline` code.\n\n```python\nprint('));
  await page.waitForSelector('.assistant .markdown strong');
  assert.equal(await page.textContent('.assistant .markdown strong'), 'bold');
  assert.equal(await page.textContent('.assistant .markdown :not(pre) > code'), 'inline');
  assert.equal(await page.isVisible('#stop'), true, 'Stop shows while the turn runs');
  await c.send(text('"hi")\n```\n\n- item one\n- item two\n'));
  await page.waitForFunction(() => document.querySelectorAll('.assistant li').length === 2);
  assert.equal(await page.textContent('.code-block .code-lang'), 'python');
  assert.equal(await page.textContent('.code-block pre code.language-python'), 'print("hi")\n');
  assert.equal(await page.textContent('.user-message'), 'Explain add()');
  await c.send({ type: 'turnEnded', result: { turnId: 's-1', stopReason: 'end_turn', text: 'ignored: already streamed', usage } });
  assert.equal(await page.isVisible('#stop'), false);
  assert.equal(await page.isVisible('#send'), true);
  assert.equal(await page.locator('.assistant .markdown').count(), 1, 'the final text is not added twice');
  assert.equal(await page.textContent('.turn-footer'), '1,234 in · 56 out tokens');
});

test('HTML in model text and tool output is escaped, never executed', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: '<b>prompt</b>' });
  const evil = 'Look: <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <b>bold?</b>\n\n'
    + '[click](javascript:window.__pwned=3) and <a href="https://evil.example">raw link</a>';
  for (let i = 0; i < evil.length; i += 7) await c.send(text(evil.slice(i, i + 7)));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'c1', name: 'read_file', title: 'read_file <i>x</i>', arguments: { path: '<svg onload=alert(1)>' }, permission: 'safe' }));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'c1', status: 'completed', output: '<img src=y onerror="window.__pwned=4">' }));
  await c.send({ type: 'turnEnded', result: { turnId: 's-1', stopReason: 'end_turn', text: evil, usage } });
  const md = page.locator('.assistant .markdown');
  assert.match((await md.textContent())!, /Look: <img src=x onerror="window.__pwned=1"> <script>/);
  assert.equal(await page.locator('#conversation img, #conversation script, #conversation svg, .markdown b, .markdown i').count(), 0);
  assert.equal(await page.locator('a[href^="javascript"]').count(), 0);
  assert.equal(await page.locator('a[href="https://evil.example"]').count(), 0);
  assert.equal(await page.textContent('.user-message'), '<b>prompt</b>');
  assert.equal(await page.textContent('.tool-title'), 'read_file <i>x</i>');
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
});

test('tool cards update in place; sub-agent activity is nested in its card', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'plan it' });
  await c.send(text('Let me plan.'));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_1', name: 'planner', title: 'planner: Add subtract()', arguments: { query: 'Add subtract()' }, permission: 'safe' }));
  const card = page.locator('.assistant > .tool-card[data-tool-call-id="call_1"]');
  assert.equal(await card.getAttribute('data-status'), 'running');
  assert.equal(await card.locator('> summary .tool-status').textContent(), 'running');
  await c.send(text('1. Read src/app.py', 'call_1'));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_2', name: 'read_file', title: 'read_file src/app.py', arguments: { path: 'src/app.py' }, permission: 'safe' }, 'call_1'));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_2', status: 'completed', output: 'def add(a, b):\n    return a + b\n' }, 'call_1'));
  await c.send(upd({ kind: 'usage', promptTokens: 5, completionTokens: 1, totalTokens: 6 }, 'call_1'));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_1', status: 'completed', output: '1. Read\n2. Add subtract()' }));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_3', name: 'write_file', title: 'write_file src/app.py', arguments: { path: 'src/app.py', content: '...' }, permission: 'sensitive' }));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_3', status: 'denied', output: 'The user did not allow this.' }));
  assert.equal(await page.locator('.tool-card').count(), 3, 'one card per call, updated in place');
  assert.equal(await card.getAttribute('data-status'), 'completed');
  assert.equal(await card.getAttribute('open'), '', 'a card with sub-agent activity opens');
  const nested = card.locator('.tool-children > .tool-card[data-tool-call-id="call_2"]');
  assert.equal(await nested.getAttribute('data-status'), 'completed');
  assert.equal(await nested.locator('.tool-output').textContent(), 'def add(a, b):\n    return a + b\n');
  assert.equal(await card.locator('.tool-children > .markdown li').textContent(), 'Read src/app.py');
  assert.equal(await page.locator('.assistant > .markdown').count(), 1, 'the sub-agent text is not the reply');
  assert.equal(await page.getAttribute('[data-tool-call-id="call_3"]', 'data-status'), 'denied');
  assert.equal(await page.textContent('#usage'), '', 'sub-agent usage is not the turn total');
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_4', name: 'grep_search', title: 'grep_search TODO', arguments: {}, permission: 'safe' }));
  await c.send({ type: 'turnEnded', result: { turnId: 's-1', stopReason: 'cancelled', text: '', usage } });
  assert.equal(await page.getAttribute('[data-tool-call-id="call_4"]', 'data-status'), 'interrupted');
  assert.equal(await page.textContent('.notice.cancelled'), 'Stopped.');
});

test('a retry drops the partial reply; compaction, usage and max_steps are shown', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'go' });
  await c.send(upd({ kind: 'compaction', strategy: 'summary', before: 52, after: 10 }));
  await c.send(text('Partial answer that gets cu'));
  await page.waitForSelector('.assistant .markdown');
  await c.send(upd({ kind: 'retry', attempt: 1, delaySeconds: 0.5, reason: 'connection dropped' }));
  await c.send(text('The full answer.'));
  await c.send(upd({ kind: 'usage', promptTokens: 100, completionTokens: 20, totalTokens: 120 }));
  await page.waitForFunction(() => document.querySelector('.assistant .markdown')?.textContent?.trim() === 'The full answer.');
  const all = (await page.textContent('.assistant'))!;
  assert.ok(!all.includes('Partial answer'), all);
  assert.equal(await page.textContent('.notice.retry'), 'Retrying (attempt 1 in 0.5s): connection dropped');
  assert.equal(await page.textContent('.notice.compaction'), 'Context compacted (summary): 52 → 10 messages');
  assert.equal(await page.textContent('#usage'), '100 in · 20 out tokens');
  await c.send({ type: 'turnEnded', result: { turnId: 's-1', stopReason: 'max_steps', text: 'Stopped after 16 steps.', usage } });
  assert.equal(await page.textContent('.notice.max_steps'), 'Stopped after 16 steps.');
});

test('a wait for MCP servers is one notice, then says which are ready and which failed', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'go' });
  await c.send(upd({ kind: 'mcp_wait', state: 'waiting', servers: ['github', 'db'] }));
  assert.equal(await page.textContent('.notice.mcp-wait.waiting'), 'Starting MCP servers: github, db…');
  await c.send(upd({ kind: 'mcp_wait', state: 'done', servers: ['github', 'db'], failed: ['db'] }));
  await c.send(text('Answer.'));
  await page.waitForFunction(() => document.querySelector('.assistant .markdown')?.textContent?.trim() === 'Answer.');
  assert.equal(await page.locator('.notice.mcp-wait').count(), 1, 'the same notice, updated');
  assert.equal(await page.locator('.notice.mcp-wait.waiting').count(), 0);
  assert.equal(await page.textContent('.notice.mcp-wait.failed'), 'MCP servers ready: github; failed: db');
});

test('a hook run is one line, its reason on a click', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'go' });
  await c.send(upd({ kind: 'hook', event: 'PreToolUse', command: 'ruff check', outcome: 'failed', durationMs: 12,
    reason: 'exit code 127: ruff: not found' }));
  await page.waitForSelector('.notice.hook.failed');
  assert.equal(await page.textContent('.notice.hook.failed summary'), 'Hook PreToolUse `ruff check` failed (12 ms)');
  assert.equal(await page.isVisible('.notice.hook .hook-reason'), false, 'the reason waits for a click');
  await page.click('.notice.hook summary');
  assert.equal(await page.textContent('.notice.hook .hook-reason'), 'exit code 127: ruff: not found');
});

test('the prompt box: Enter sends, Shift+Enter is a newline, slash completion, Stop sends cancel', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'commands', commands: [
    { name: 'help', usage: '/help [command]', help: 'List the commands.', aliases: ['?'], source: 'builtin' },
    { name: 'sessions', usage: '/sessions', help: 'List the sessions.', aliases: ['ls'], source: 'builtin' },
    { name: 'switch', usage: '/switch <id>', help: 'Resume a session.', aliases: ['resume'], source: 'builtin' },
  ] });
  await page.click('#prompt');
  await page.keyboard.type('first line');
  await page.keyboard.press('Shift+Enter');
  await page.keyboard.type('second line');
  await page.keyboard.press('Enter');
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'prompt'), [{ type: 'prompt', text: 'first line\nsecond line' }]);
  assert.equal(await page.inputValue('#prompt'), '');

  await page.keyboard.type('/s');
  await page.waitForSelector('#completions:not([hidden])');
  assert.deepEqual(await page.locator('.completion-usage').allTextContents(), ['/sessions', '/switch <id>']);
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Tab');
  assert.equal(await page.inputValue('#prompt'), '/switch ');
  assert.equal(await page.isHidden('#completions'), true);
  await page.keyboard.type('abc');
  await page.keyboard.press('Enter');
  await page.keyboard.type('/he');
  await page.keyboard.press('Enter'); // completes first
  assert.equal(await page.inputValue('#prompt'), '/help ');
  await page.keyboard.press('Enter');
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'prompt').map((m) => m.type === 'prompt' && m.text),
    ['first line\nsecond line', '/switch abc', '/help']);

  await c.send({ type: 'turnStarted', text: 'long job' });
  assert.equal(await page.isVisible('#stop'), true);
  assert.equal(await page.isVisible('#send'), false);
  await page.keyboard.type('not now');
  await page.keyboard.press('Enter');
  assert.equal((await c.posted()).filter((m) => m.type === 'prompt').length, 3, 'no prompt while a turn runs');
  await c.send({ type: 'progress', message: 'running grep_search' });
  assert.equal(await page.textContent('#status'), 'running grep_search');
  await page.click('#stop');
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'cancel'), [{ type: 'cancel' }]);
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'cancelled', text: '', usage } });
  assert.equal(await page.isVisible('#stop'), false);
  assert.equal(await page.textContent('#status'), '');
});

test('slash command output, a failed turn, the daemon-exited banner with Restart, links', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: '/sessions' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'command', text: '* 3f2a  demo  (2 messages)\n  9b1c  older', usage } });
  assert.equal(await page.textContent('.command-output'), '* 3f2a  demo  (2 messages)\n  9b1c  older');
  assert.equal(await page.getAttribute('.user-message', 'class'), 'user-message command');
  await c.send({ type: 'turnStarted', text: 'hello' });
  await c.send({ type: 'turnFailed', message: "provider 'openai' failed: authentication failed" });
  assert.equal(await page.textContent('.notice.error'), "provider 'openai' failed: authentication failed");
  assert.equal(await page.isVisible('#stop'), false);

  await c.send({ type: 'daemon', state: 'exited', message: 'The ToyCoder daemon exited (code 1).' });
  assert.equal(await page.textContent('#banner .banner-text'), 'The ToyCoder daemon exited (code 1).');
  assert.equal(await page.getAttribute('body', 'data-daemon'), 'exited');
  await page.click('#banner button.restart');
  assert.ok((await c.posted()).some((m) => m.type === 'restart'));
  await c.send({ type: 'daemon', state: 'ready' });
  assert.equal(await page.isHidden('#banner'), true);
  assert.equal(await page.getAttribute('body', 'data-daemon'), 'ready'); // what the code-server tests wait for

  await c.send({ type: 'turnStarted', text: 'links' });
  await c.send(text('See [the docs](https://example.com/docs).'));
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: '', usage } });
  await page.click('a[href="https://example.com/docs"]');
  assert.ok((await c.posted()).some((m) => m.type === 'openLink' && m.href === 'https://example.com/docs'));
  assert.equal(page.url(), 'https://webview.test/index.html', 'the webview did not navigate');
});

test('a resumed session renders its transcript', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'transcript', session: { sessionId: 's', title: 't', createdAt: '', updatedAt: '', messageCount: 5 }, entries: [
    { role: 'user', text: 'what is this?' },
    { role: 'assistant', text: 'Let me **look**.' },
    { role: 'tool_call', text: '{"path": "README.md"}', toolCallId: 'call_1', name: 'read_file' },
    { role: 'tool', text: '# Demo', toolCallId: 'call_1', name: 'read_file' },
    { role: 'assistant', text: 'It is a demo.' },
    { role: 'user', text: 'thanks' },
  ] });
  assert.deepEqual(await page.locator('.user-message').allTextContents(), ['what is this?', 'thanks']);
  await page.waitForSelector('.markdown strong');
  assert.equal(await page.textContent('.tool-card .tool-title'), 'read_file README.md', 'the title the live card had');
  assert.equal(await page.getAttribute('.tool-card', 'data-status'), 'completed');
  assert.equal(await page.textContent('.tool-card .tool-output'), '# Demo');
  assert.match((await page.textContent('.tool-card .tool-args'))!, /"path": "README.md"/);
  await c.send({ type: 'transcript', session: null, entries: [] });
  assert.equal(await page.locator('.turn').count(), 0);
  assert.equal(await page.isVisible('#empty'), true);
});

test('screenshot of a realistic conversation (artifact)', async () => {
  const c = await chat({ height: 980 });
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'average([2, 4, 6]) returns 6.0 instead of 4.0. Find the bug and fix it.' });
  await c.send(text("I'll start by looking at the project layout.\n"));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_1', name: 'list_directory', title: 'list_directory .', arguments: { path: '.' }, permission: 'safe' }));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_1', status: 'completed', output: 'README.md\ncalc.py\ntests/' }));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_2', name: 'planner', title: 'planner: fix average()', arguments: { query: 'fix average()' }, permission: 'safe' }));
  await c.send(text('1. Read `calc.py`\n2. Fix the divisor', 'call_2'));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_3', name: 'read_file', title: 'read_file calc.py', arguments: { path: 'calc.py' }, permission: 'safe' }, 'call_2'));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_3', status: 'completed', output: 'def average(numbers):\n    return sum(numbers) / (len(numbers) - 1)\n' }, 'call_2'));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_2', status: 'completed', output: '1. Read calc.py\n2. Fix the divisor' }));
  await c.send(text('Found it: `average` divides by `len(numbers) - 1`. The fix:\n\n```python\ndef average(numbers):\n    return sum(numbers) / len(numbers)\n```\n'));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_4', name: 'edit_file', title: 'edit_file calc.py', arguments: { path: 'calc.py', old_string: '(len(numbers) - 1)', new_string: 'len(numbers)' }, permission: 'sensitive' }));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'call_4', status: 'completed', output: 'edited calc.py' }));
  await c.send(text('Done. **`average` now divides by `len(numbers)`**, so `average([2, 4, 6]) == 4.0`.\n\n<script>alert("escaped")</script>'));
  await c.send(upd({ kind: 'usage', ...usage }));
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: '', usage } });
  await c.send({ type: 'turnStarted', text: 'Now add a test for it' });
  await c.send(text('Writing `tests/test_calc.py`'));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_5', name: 'write_file', title: 'write_file tests/test_calc.py', arguments: { path: 'tests/test_calc.py', content: 'from calc import average\n' }, permission: 'sensitive' }));
  await c.send({ type: 'progress', message: 'waiting for your permission: write_file tests/test_calc.py' });
  await c.send({ type: 'commands', commands: [{ name: 'help', usage: '/help [command]', help: 'List the commands, or explain one.', aliases: [], source: 'builtin' }] });
  await page.click('#prompt');
  await page.keyboard.type('/');
  await page.waitForSelector('.completion');
  await page.waitForTimeout(100);
  mkdirSync(ARTIFACTS, { recursive: true });
  const file = join(ARTIFACTS, 'webview-chat.png');
  await page.screenshot({ path: file });
  // the picture has the content a person would look for
  assert.equal(await page.locator('.tool-card').count(), 5);
  assert.equal(await page.isVisible('#stop'), true);
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(bg, 'rgb(24, 24, 24)', 'theme colours come from the VS Code variables');
  const codeBg = await page.evaluate(() => getComputedStyle(document.querySelector('.code-block')!).backgroundColor);
  assert.equal(codeBg, 'rgb(43, 43, 43)', 'code blocks are styled');
  process.stdout.write(`# screenshot: ${file}\n`);
});
