/**
 * Permission cards in the chat webview (headless Chromium): a 120-line proposal is read to its last
 * line while the request is pending, then allowed; a command is denied; each card becomes a one-line
 * record when the host says it is decided (from the card, from the diff editor, or withdrawn).
 * Screenshots of the pending card, dark and light, are kept as artifacts.
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import type { ToWebview } from '../../src/shared/messages';
import type { PermissionParams, Update } from '../../src/shared/protocol';
import { ChatPage, useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();

const upd = (update: Update): ToWebview => ({ type: 'update', params: { sessionId: 's', turnId: 's-1', update } });

/** A new 120-line file, as write_file's preview. */
const BIG_LINES = Array.from({ length: 120 }, (_, i) => `ROWS.append(${i + 1})  # row ${i + 1} of 120`);
const BIG_DIFF = `--- /dev/null\n+++ b/src/table.py\n@@ -0,0 +1,120 @@\n${BIG_LINES.map((l) => `+${l}`).join('\n')}\n`;
const bigWrite: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_1', tool: 'write_file', level: 'sensitive',
  title: 'write_file src/table.py', arguments: { path: 'src/table.py', content: BIG_LINES.join('\n') },
  preview: { kind: 'diff', path: 'src/table.py', diff: BIG_DIFF },
};
const edit: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_3', tool: 'edit_file', level: 'sensitive', title: 'edit_file calc.py',
  arguments: { path: 'calc.py' },
  preview: { kind: 'diff', path: 'calc.py', diff: '--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def average(numbers):\n'
    + '-    return sum(numbers) / (len(numbers) - 1)\n+    return sum(numbers) / len(numbers)\n' },
};
const command: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_2', tool: 'run_command', level: 'dangerous', title: 'run_command pytest -q',
  arguments: { command: 'pytest -q' }, preview: { kind: 'command', command: 'pytest -q', cwd: '/work/proj' },
};

async function startWrite(c: ChatPage, params: PermissionParams, id: string): Promise<void> {
  await c.send(upd({ kind: 'tool_call', toolCallId: params.toolCallId, name: params.tool, title: params.title,
    arguments: params.arguments, permission: params.level }));
  await c.send({ type: 'permission', id, params });
}

/** Where the diff's last line is, against the diff's own scroll box and the conversation's. */
function lastLineVisible(page: Page, id: string): Promise<boolean> {
  return page.evaluate((reviewId) => {
    const card = document.querySelector(`[data-review-id="${reviewId}"]`)!;
    const box = card.querySelector('.diff')!.getBoundingClientRect();
    const last = card.querySelector('.diff .diff-line:last-child')!.getBoundingClientRect();
    const conv = document.getElementById('conversation')!.getBoundingClientRect();
    return last.top >= box.top - 1 && last.bottom <= box.bottom + 1 && last.top >= conv.top - 1 && last.bottom <= conv.bottom + 1;
  }, id);
}

test('a 120-line proposal is read to its last line while pending, then allowed', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'Write the table module' });
  await startWrite(c, bigWrite, 'review-1');
  const card = page.locator('.permission-card[data-review-id="review-1"]');
  assert.equal(await card.getAttribute('data-state'), 'pending');
  assert.equal(await page.locator('.tool-card[data-tool-call-id="call_1"] + .permission-card').count(), 1,
    'the card follows its tool call');
  assert.equal(await card.locator('.permission-question').textContent(), 'ToyCoder wants to run write_file src/table.py');
  assert.equal(await card.locator('.permission-file').textContent(), 'src/table.py +120 −0');
  assert.deepEqual(await card.locator('.permission-actions button').allTextContents(),
    ['Allow once', 'Always allow', 'Deny', 'No wrap', 'Open diff']);
  // the whole diff is there, coloured as a diff, and its box scrolls
  assert.equal(await card.locator('.diff-line.diff-add').count(), 120);
  assert.equal(await card.locator('.diff-line.diff-hunk').count(), 1);
  const addBg = await card.locator('.diff-add').first().evaluate((el) => getComputedStyle(el).backgroundColor);
  const hunkBg = await card.locator('.diff-hunk').evaluate((el) => getComputedStyle(el).backgroundColor);
  assert.equal(addBg, 'rgba(155, 185, 85, 0.2)', 'added lines are green');
  assert.notEqual(hunkBg, addBg);
  assert.equal(await card.locator('.diff-add').last().locator('.diff-no').nth(1).textContent(), '120');
  const diff = card.locator('.diff');
  const [scrollHeight, clientHeight] = await diff.evaluate((el) => [el.scrollHeight, el.clientHeight]);
  assert.ok(scrollHeight > clientHeight * 2, `scrollable: ${scrollHeight} > ${clientHeight}`);
  assert.equal(await lastLineVisible(page, 'review-1'), false, 'the last line starts out of sight');

  // scroll the diff with the mouse wheel, as a person would
  const box = (await diff.boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  const deadline = Date.now() + 10000;
  while (!(await lastLineVisible(page, 'review-1'))) {
    assert.ok(Date.now() < deadline, 'the wheel scrolls the diff to its end');
    await page.mouse.wheel(0, 300);
  }
  assert.equal(await card.locator('.diff-line:last-child .diff-text').textContent(), '+ROWS.append(120)  # row 120 of 120');
  assert.equal(await card.getAttribute('data-state'), 'pending', 'still pending while it is read');
  assert.deepEqual((await c.posted()).filter((m) => m.type.startsWith('permission')), []);

  await card.locator('button.permission-allow').click();
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'permissionDecision'),
    [{ type: 'permissionDecision', id: 'review-1', decision: 'allow_once' }]);
  assert.deepEqual(await card.locator('.permission-actions button').evaluateAll((bs) => bs.slice(0, 3).map((b) => (b as HTMLButtonElement).disabled)),
    [true, true, true], 'one answer');
  await c.send({ type: 'permissionDecided', id: 'review-1', outcome: 'allow_once', source: 'chat' });
  const record = page.locator('.permission-record[data-review-id="review-1"]');
  assert.equal(await record.textContent(), '\u2713Allowed once: write_file src/table.py');
  assert.equal(await record.locator('.diff, button').count(), 0, 'the record is one line');
  const height = (await record.boundingBox())!.height;
  assert.ok(height < 30, `one line high, got ${height}`);
});

test('a command is denied; its card shows the command and its directory, no Open diff', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'run the tests' });
  await startWrite(c, command, 'review-7');
  const card = page.locator('[data-review-id="review-7"]');
  assert.equal(await card.locator('.permission-command').textContent(), '$ pytest -q');
  assert.equal(await card.locator('.permission-cwd').textContent(), 'in /work/proj');
  assert.equal(await card.locator('.permission-level').textContent(), 'dangerous');
  assert.equal(await card.locator('.permission-open-diff').count(), 0);
  await card.locator('button.permission-deny').click();
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'permissionDecision'),
    [{ type: 'permissionDecision', id: 'review-7', decision: 'reject' }]);
  await c.send({ type: 'permissionDecided', id: 'review-7', outcome: 'reject', source: 'chat' });
  assert.equal(await card.getAttribute('class'), 'permission-record');
  assert.equal(await card.getAttribute('data-state'), 'reject');
  assert.equal(await card.textContent(), '\u2298Denied: run_command pytest -q');
});

test('Open diff keeps the card pending; Accept in the diff editor, Always allow, and a withdrawn request are recorded', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix average' });
  await startWrite(c, edit, 'review-2');
  const card = page.locator('[data-review-id="review-2"]');
  assert.deepEqual(await card.locator('.diff-line').evaluateAll((rows) => rows.map((r) => r.className.replace('diff-line diff-', ''))),
    ['meta', 'meta', 'hunk', 'ctx', 'del', 'add']);
  assert.deepEqual(await card.locator('.diff-del .diff-no').allTextContents(), ['2', ''], 'old line number on a removed line');
  await card.locator('button.permission-open-diff').click();
  await card.locator('button.permission-open-diff').click();
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'openDiff'), [{ type: 'openDiff', id: 'review-2' }, { type: 'openDiff', id: 'review-2' }]);
  assert.equal(await card.getAttribute('data-state'), 'pending');
  assert.equal(await card.locator('button.permission-allow').isEnabled(), true, 'Open diff does not decide');
  await c.send({ type: 'permissionDecided', id: 'review-2', outcome: 'allow_once', source: 'editor' });
  assert.equal(await card.textContent(), '\u2713Allowed once (in the diff editor): edit_file calc.py');

  await startWrite(c, { ...edit, toolCallId: 'call_4' }, 'review-3');
  await page.locator('[data-review-id="review-3"] button.permission-always').click();
  assert.ok((await c.posted()).some((m) => m.type === 'permissionDecision' && m.id === 'review-3' && m.decision === 'allow_always'));
  await c.send({ type: 'permissionDecided', id: 'review-3', outcome: 'allow_always', source: 'chat' });
  assert.equal(await page.textContent('[data-review-id="review-3"]'), '\u2713Always allowed: edit_file calc.py');

  await startWrite(c, { ...edit, toolCallId: 'call_5' }, 'review-4');
  await c.send({ type: 'permission', id: 'review-4', params: { ...edit, toolCallId: 'call_5' } }); // reposted: not twice
  assert.equal(await page.locator('[data-review-id="review-4"]').count(), 1);
  await c.send({ type: 'permissionDecided', id: 'review-4', outcome: 'cancelled', source: 'chat' });
  assert.equal(await page.getAttribute('[data-review-id="review-4"]', 'data-state'), 'cancelled');
  assert.match((await page.textContent('[data-review-id="review-4"]'))!, /Withdrawn/);
  await c.send({ type: 'permissionDecided', id: 'unknown', outcome: 'reject', source: 'chat' }); // ignored
  await c.send({ type: 'turnEnded', result: { turnId: 's-1', stopReason: 'end_turn', text: 'ok', usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 } } });
  assert.equal(await page.locator('.permission-record').count(), 3, 'records stay in the conversation');
});

test('HTML in a proposal is text; a card outside a turn and showPermission bring it into view', async () => {
  const c = await chat({ height: 500 });
  const { page } = c;
  const evil: PermissionParams = { ...edit, toolCallId: 'call_x', title: 'edit_file <img src=x onerror="window.__pwned=1">',
    preview: { kind: 'diff', path: '<b>x</b>.py', diff: '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-<script>window.__pwned=2</script>\n+<img src=y onerror="window.__pwned=3">\n' } };
  await c.send({ type: 'permission', id: 'review-9', params: evil });
  assert.equal(await page.locator('#conversation img, #conversation script, #conversation b').count(), 0);
  assert.match((await page.textContent('[data-review-id="review-9"] .diff'))!, /<script>window.__pwned=2<\/script>/);
  for (let i = 0; i < 30; i++) await c.send({ type: 'notice', level: 'info', text: `line ${i}` });
  await page.evaluate(() => { document.getElementById('conversation')!.scrollTop = 1e6; });
  await c.send({ type: 'showPermission', id: 'review-9' });
  const inView = await page.evaluate(() => {
    const r = document.querySelector('[data-review-id="review-9"]')!.getBoundingClientRect();
    const conv = document.getElementById('conversation')!.getBoundingClientRect();
    return r.bottom > conv.top && r.top < conv.bottom;
  });
  assert.equal(inView, true);
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-review-id')), 'review-9');
  assert.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined);
});

test('showPermission for a card not drawn yet focuses it when it arrives (a webview just created)', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'showPermission', id: 'review-5' });
  await c.send({ type: 'transcript', session: null, entries: [] });
  await c.send({ type: 'permission', id: 'review-4', params: command });
  assert.notEqual(await page.evaluate(() => document.activeElement?.getAttribute('data-review-id')), 'review-4');
  await c.send({ type: 'permission', id: 'review-5', params: { ...command, toolCallId: 'call_9' } });
  assert.equal(await page.evaluate(() => document.activeElement?.getAttribute('data-review-id')), 'review-5');
});

for (const theme of ['dark', 'light'] as const) {
  test(`screenshot of a pending proposal card, ${theme} (artifact)`, async () => {
    const c = await chat({ height: 980, theme });
    const { page } = c;
    await c.send({ type: 'turnStarted', text: 'average([2, 4, 6]) returns 6.0 instead of 4.0. Fix it and add a table of rows.' });
    await c.send(upd({ kind: 'text_delta', text: 'Found it: `average` divides by `len(numbers) - 1`.\n' }));
    await startWrite(c, edit, 'review-1');
    await c.send({ type: 'permissionDecided', id: 'review-1', outcome: 'allow_once', source: 'editor' });
    await c.send(upd({ kind: 'tool_result', toolCallId: 'call_3', status: 'completed', output: 'edited calc.py' }));
    await c.send(upd({ kind: 'text_delta', text: 'Now the table module.\n' }));
    await startWrite(c, bigWrite, 'review-2');
    await c.send({ type: 'progress', message: 'waiting for your permission: write_file src/table.py' });
    await page.waitForTimeout(100); // let fonts settle for the picture
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = join(ARTIFACTS, `webview-permission-card-${theme}.png`);
    await page.screenshot({ path: file });
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    assert.equal(bg, theme === 'dark' ? 'rgb(24, 24, 24)' : 'rgb(248, 248, 248)', 'the theme applies');
    assert.equal(await page.locator('.permission-card').count(), 1);
    assert.equal(await page.locator('.permission-record').count(), 1);
    assert.equal(await page.isVisible('.permission-card .permission-actions'), true, 'the buttons are on screen');
    process.stdout.write(`# screenshot: ${file}\n`);
  });
}

test('another editor\'s turn: its call is asked here too, "Waiting for approval in" it, and its decision there is recorded', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'elsewhere', client: 'Neovim', running: true, prompt: 'fix average' });
  assert.equal(await page.locator('#status').textContent(), 'Running in Neovim');
  await startWrite(c, edit, 'review-9');
  const card = page.locator('[data-review-id="review-9"]');
  assert.equal(await card.getAttribute('data-state'), 'pending', 'the same card as for a turn of this editor');
  assert.equal(await page.locator('#status').textContent(), 'Waiting for approval in Neovim');
  assert.equal(await page.locator('.tool-card[data-tool-call-id="call_3"]').getAttribute('data-status'), 'running',
    'never interrupted while it waits');
  await c.send({ type: 'permissionDecided', id: 'review-9', outcome: 'allow_once', source: 'chat', by: 'Neovim' });
  assert.equal(await card.textContent(), '\u2713Allowed once (in Neovim): edit_file calc.py');
  assert.equal(await page.locator('#status').textContent(), 'Running in Neovim');
});
