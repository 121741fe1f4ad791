/**
 * The chat at the default side-bar width (issue 32), in headless Chromium: the header row with the
 * session's title and mode (a click asks the host for the mode picker), a review card's diff that
 * wraps (with a No wrap toggle), the ask_user answer in the transcript, error notices that wrap
 * and offer Retry, the plan pinned above the conversation during a long turn, and a turn running in
 * another editor (`turn_elsewhere`) shown live with "Running in <client>".
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ToWebview } from '../../src/shared/messages';
import type { PermissionParams, PlanEntryInfo, Update } from '../../src/shared/protocol';
import { useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();
const SIDE_BAR = { width: 300, height: 700 }; // VS Code's default side-bar width

const upd = (update: Update, parentToolCallId?: string): ToWebview =>
  ({ type: 'update', params: { sessionId: 's', turnId: 's-1', update, parentToolCallId } });
const usage = { promptTokens: 10, completionTokens: 2, totalTokens: 12 };

test('the header row shows the title and the mode; a click on the mode asks the host for the picker', async () => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  assert.equal(await page.textContent('#header-title'), 'New conversation');
  await c.send({ type: 'header', title: 'Fix the average in calc.py so empty lists work', mode: 'Accept edits' });
  assert.equal(await page.textContent('#header-title'), 'Fix the average in calc.py so empty lists work');
  assert.equal(await page.textContent('#header-mode'), 'Accept edits');
  // one row, inside the view: a long title is cut, the mode stays whole and in sight
  const [title, mode] = await page.$$eval('#header-title, #header-mode', (els) => els.map((e) => e.getBoundingClientRect().toJSON()));
  assert.ok(mode.top < title.bottom && title.top < mode.bottom && title.right <= mode.left, 'one row');
  assert.ok(mode.right <= SIDE_BAR.width, `the mode button is in sight: ${JSON.stringify(mode)}`);
  await page.click('#header-mode');
  assert.ok((await c.posted()).some((m) => m.type === 'pickMode'), 'the click asks for the mode picker');
});

const LONG = '    return sum(value for value in numbers if value is not None) / max(len([v for v in numbers if v is not None]), 1)';
const review: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_1', tool: 'edit_file', level: 'sensitive', title: 'edit_file calc.py',
  arguments: { path: 'calc.py' },
  preview: { kind: 'diff', path: 'calc.py', diff: `--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def average(numbers):\n`
    + `-    return sum(numbers) / len(numbers)\n+${LONG}\n` },
};

test('a review card\'s diff wraps at the side-bar width; No wrap keeps each line on one row', async (t) => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix average' });
  await c.send(upd({ kind: 'tool_call', toolCallId: 'call_1', name: 'edit_file', title: 'edit_file calc.py',
    arguments: review.arguments, permission: 'sensitive' }));
  await c.send({ type: 'permission', id: 'r1', params: review });
  const diff = page.locator('.permission-card .diff');
  const added = diff.locator('.diff-add .diff-text');
  const measure = () => page.evaluate(() => {
    const d = document.querySelector('.permission-card .diff') as HTMLElement;
    const text = d.querySelector('.diff-add .diff-text') as HTMLElement;
    const probe = document.createElement('span');
    probe.textContent = 'x'.repeat(100);
    probe.style.whiteSpace = 'pre'; // one row: its width is 100 characters'
    probe.style.display = 'inline-block';
    text.append(probe);
    const charWidth = probe.getBoundingClientRect().width / 100;
    probe.remove();
    const lineHeight = parseFloat(getComputedStyle(text).lineHeight);
    return { scroll: d.scrollWidth, client: d.clientWidth, textWidth: text.getBoundingClientRect().width,
      rows: Math.round(text.getBoundingClientRect().height / lineHeight), charWidth };
  });
  const wrapped = await measure();
  assert.ok(wrapped.scroll <= wrapped.client + 1, `no sideways scrolling: ${JSON.stringify(wrapped)}`);
  const perRow = Math.floor(wrapped.textWidth / wrapped.charWidth);
  t.diagnostic(`${perRow} characters per diff row at ${SIDE_BAR.width}px, the long line on ${wrapped.rows} rows`);
  assert.ok(perRow >= 25, `at least 25 characters per diff row at ${SIDE_BAR.width}px (was about 12): ${perRow}`);
  assert.ok(wrapped.rows >= Math.ceil(LONG.length / perRow) - 1, `the long line wraps onto rows: ${JSON.stringify(wrapped)}`);
  assert.equal(await added.textContent(), `+${LONG}`, 'the whole line is there');
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'webview-sidebar-diff.png'), fullPage: true });

  const toggle = page.locator('.permission-card .diff-wrap-toggle');
  assert.equal(await toggle.textContent(), 'No wrap');
  await toggle.click();
  assert.equal(await toggle.getAttribute('aria-pressed'), 'true');
  assert.equal(await toggle.textContent(), 'Wrap');
  const unwrapped = await measure();
  assert.equal(unwrapped.rows, 1, 'one row per line');
  assert.ok(unwrapped.scroll > unwrapped.client, 'the diff scrolls sideways instead');
  await toggle.click();
  assert.ok((await measure()).rows > 1, 'wrapped again');
  assert.ok(!(await c.posted()).some((m) => m.type === 'permissionDecision'), 'the toggle decides nothing');
});

test('the ask_user answer shows in the transcript, live and loaded', async () => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'set up the database' });
  await c.send(upd({ kind: 'tool_call', toolCallId: 'ask_1', name: 'ask_user', title: 'ask_user Which database?',
    arguments: { question: 'Which database?', options: ['Postgres', 'SQLite'] }, permission: 'safe' }));
  await c.send(upd({ kind: 'tool_result', toolCallId: 'ask_1', status: 'completed', output: 'The user answered: Postgres' }));
  const answer = page.locator('.tool-card[data-tool-call-id="ask_1"] + .ask-answer');
  assert.equal(await answer.locator('.ask-question').textContent(), 'Which database?');
  assert.equal(await answer.locator('.ask-reply').textContent(), 'Postgres');
  assert.ok(await answer.isVisible(), 'in sight, not inside the collapsed card');
  assert.equal(await page.locator('.tool-card[data-tool-call-id="ask_1"]').evaluate((e) => (e as HTMLDetailsElement).open), false);

  await c.send({ type: 'transcript', session: null, entries: [
    { role: 'user', text: 'set up the database' },
    { role: 'tool_call', name: 'ask_user', toolCallId: 'ask_2', text: JSON.stringify({ question: 'Which port?' }) },
    { role: 'tool', toolCallId: 'ask_2', status: 'completed', text: 'The user answered: 5433' },
    { role: 'tool_call', name: 'ask_user', toolCallId: 'ask_3', text: JSON.stringify({ question: 'Which user?' }) },
    { role: 'tool', toolCallId: 'ask_3', status: 'completed', text: 'The user did not answer (the question was dismissed).' },
  ] });
  assert.deepEqual(await page.locator('.ask-answer').evaluateAll((els) => els.map((e) =>
    [e.querySelector('.ask-question')?.textContent, e.querySelector('.ask-reply')?.textContent, e.classList.contains('unanswered')])),
  [['Which port?', '5433', false], ['Which user?', 'No answer', true]]);
});

test('an error notice wraps at the side-bar width and offers Retry, which sends the prompt again', async () => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix average' });
  const message = `provider 'openai' failed: 500 https://api.example.invalid/v1/chat/completions?${'request_id='.repeat(12)}abc`;
  await c.send({ type: 'turnFailed', message });
  const notice = page.locator('.notice.error');
  assert.equal(await notice.textContent(), message);
  const [scroll, client] = await page.$eval('#conversation', (e) => [e.scrollWidth, e.clientWidth]);
  assert.ok(scroll <= client, `nothing overflows sideways: ${scroll} > ${client}`);
  assert.ok((await notice.evaluate((e) => e.getBoundingClientRect().right)) <= SIDE_BAR.width, 'the notice stays in the view');
  const retry = page.locator('.notice.error + button.retry');
  assert.equal(await retry.textContent(), 'Retry');
  await retry.click();
  const prompts = (await c.posted()).filter((m) => m.type === 'prompt');
  assert.deepEqual(prompts, [{ type: 'prompt', text: 'fix average' }]);
  assert.equal(await retry.isDisabled(), true, 'one retry per click');

  // a turn the daemon ended with stopReason error offers it too; a cancelled one does not
  await c.send({ type: 'turnStarted', text: 'again' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'error', text: 'the model failed', usage } });
  assert.equal(await page.locator('.turn:last-child .notice.error + button.retry').count(), 1);
  await c.send({ type: 'turnStarted', text: 'stop this' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'cancelled', text: '', usage } });
  assert.equal(await page.locator('.turn:last-child button.retry').count(), 0);
});

const plan = (...statuses: PlanEntryInfo['status'][]): ToWebview => upd({ kind: 'plan', entries: [
  { content: 'read calc.py', priority: 'medium', status: statuses[0] },
  { content: 'fix average()', priority: 'high', status: statuses[1] },
  { content: 'run the tests', priority: 'low', status: statuses[2] },
] });

test('the plan stays pinned in sight while a long turn scrolls its card away; done, it unpins', async () => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  const pinned = page.locator('#pinned-plan');
  assert.equal(await pinned.isVisible(), false, 'no plan, no pin');
  await c.send({ type: 'turnStarted', text: 'fix average' });
  await c.send(plan('completed', 'in_progress', 'pending'));
  for (let i = 0; i < 60; i++) await c.send(upd({ kind: 'text_delta', text: `Step ${i}: reading more of the code.\n\n` }));
  await page.waitForFunction(() => document.getElementById('conversation')!.scrollTop > 500);
  const inView = (selector: string) => page.evaluate((s) => {
    const r = document.querySelector(s)!.getBoundingClientRect();
    const conv = document.getElementById('conversation')!.getBoundingClientRect();
    return r.bottom > Math.max(conv.top, 0) && r.top < Math.min(conv.bottom, window.innerHeight);
  }, selector);
  assert.equal(await inView('.assistant .plan-card'), false, 'the card scrolled away');
  assert.equal(await pinned.isVisible(), true);
  const box = await pinned.evaluate((e) => e.getBoundingClientRect().toJSON());
  assert.ok(box.top >= 0 && box.bottom <= SIDE_BAR.height, 'the pin is in sight');
  assert.equal(await pinned.locator('summary').textContent(), 'Plan · 1/3 done · ▸ fix average()');
  assert.deepEqual(await pinned.locator('.pinned-plan-entry').evaluateAll((els) => els.map((e) => (e as HTMLElement).dataset.status)),
    ['completed', 'in_progress', 'pending']);
  assert.equal(await page.locator('.plan-card').count(), 1, 'the turn keeps its one card');

  await c.send(plan('completed', 'completed', 'in_progress'));
  assert.equal(await pinned.locator('summary').textContent(), 'Plan · 2/3 done · ▸ run the tests');
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: '', usage } });
  assert.equal(await pinned.isVisible(), true, 'a step is left: still pinned');
  await c.send({ type: 'turnStarted', text: 'finish' });
  await c.send(plan('completed', 'completed', 'completed'));
  assert.equal(await pinned.isVisible(), true, 'pinned while its turn runs');
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: '', usage } });
  assert.equal(await pinned.isVisible(), false, 'all done and the turn over: unpinned');

  // a loaded session with an unfinished plan pins it; a sub-agent's plan never replaces the pin
  await c.send({ type: 'transcript', session: null, entries: [
    { role: 'user', text: 'fix average' },
    { role: 'plan', text: '', entries: [{ content: 'read calc.py', priority: 'medium', status: 'in_progress' }] },
  ] });
  assert.equal(await pinned.locator('summary').textContent(), 'Plan · 0/1 done · ▸ read calc.py');
  await c.send({ type: 'turnStarted', text: 'go on' });
  await c.send(upd({ kind: 'tool_call', toolCallId: 'sub', name: 'planner', title: 'planner', arguments: {}, permission: 'safe' }));
  await c.send(upd({ kind: 'plan', entries: [{ content: 'a sub-agent step', priority: 'low', status: 'pending' }] }, 'sub'));
  assert.equal(await pinned.locator('summary').textContent(), 'Plan · 0/1 done · ▸ read calc.py');
});

test('a turn running in another editor shows as a turn here, with "Running in <client>" until it ends', async () => {
  const c = await chat(SIDE_BAR);
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'first, here' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: 'Done here.', usage } });
  await c.send({ type: 'elsewhere', client: 'toycoder.nvim', running: true, prompt: 'explain calc.py' });
  assert.equal(await page.textContent('#status'), 'Running in toycoder.nvim');
  await c.send(upd({ kind: 'text_delta', text: 'It computes **averages**.' }));
  await c.send(upd({ kind: 'tool_call', toolCallId: 'x1', name: 'read_file', title: 'read_file calc.py', arguments: {}, permission: 'safe' }));
  const last = page.locator('#conversation > .turn').last();
  await last.locator('.markdown strong').waitFor();
  assert.equal((await last.locator('.user-message').textContent())!.trim(), 'explain calc.py');
  assert.equal(await page.locator('#conversation > .turn').count(), 2, 'its own turn, after ours');
  assert.equal(await page.isVisible('#stop'), false, 'not ours to stop from the Stop button');
  await c.send({ type: 'elsewhere', client: 'toycoder.nvim', running: false });
  assert.equal(await page.textContent('#status'), '');
  assert.equal(await last.locator('.tool-card').getAttribute('data-status'), 'interrupted', 'a call without a result, as live');
});
