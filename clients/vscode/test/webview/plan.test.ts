/**
 * What the daemon now sends, in the chat webview (headless Chromium): the plan checklist card
 * replaced in place on each `plan` update, and restored turns that end as live ones did (the
 * Stopped notice for an interrupted reply, the token footer from the user entry's stopReason/usage).
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ToWebview } from '../../src/shared/messages';
import type { PlanEntryInfo, Update } from '../../src/shared/protocol';
import { useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();

const upd = (update: Update): ToWebview => ({ type: 'update', params: { sessionId: 's', turnId: 's-1', update } });
const usage = { promptTokens: 1234, completionTokens: 56, totalTokens: 1290 };
const plan = (...statuses: PlanEntryInfo['status'][]): ToWebview => upd({ kind: 'plan', entries: [
  { content: 'read calc.py', priority: 'medium', status: statuses[0] },
  { content: 'fix average()', priority: 'high', status: statuses[1] },
  { content: 'run the tests', priority: 'low', status: statuses[2] },
] });

test('the plan is one checklist card, replaced in place by each plan update', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix average' });
  await c.send(plan('in_progress', 'pending', 'pending'));
  await c.send(upd({ kind: 'text_delta', text: 'Reading first.' }));
  await page.waitForSelector('.plan-card .plan-entry');
  assert.equal(await page.textContent('.plan-head'), 'Plan · 0/3 done');
  await c.send(plan('completed', 'in_progress', 'pending'));
  await page.waitForFunction(() => document.querySelector('.plan-head')?.textContent === 'Plan · 1/3 done');
  assert.equal(await page.locator('.plan-card').count(), 1, 'updated in place, not a second card');
  const entries = await page.$$eval('.plan-entry', (els) => els.map((e) => [(e as HTMLElement).dataset.status,
    e.querySelector('.plan-mark')!.textContent, e.querySelector('.plan-content')!.textContent]));
  assert.deepEqual(entries, [['completed', '✓', 'read calc.py'], ['in_progress', '▸', 'fix average()'],
    ['pending', '○', 'run the tests']]);
  assert.equal(await page.locator('.plan-priority').count(), 1, 'the high-priority open step is marked');
  const order = await page.$$eval('.assistant > *', (els) => els.map((e) => e.className));
  assert.ok(order.indexOf('plan-card') < order.indexOf('markdown'), `the card stays where it first came: ${order}`);
  const decoration = await page.$eval('.plan-entry.status-completed .plan-content', (e) => getComputedStyle(e).textDecorationLine);
  assert.equal(decoration, 'line-through');
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: 'Reading first.', usage } });
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'webview-plan.png'), fullPage: true });
});

test('restored turns end like live ones: Stopped for an interrupted reply, then the footer', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'transcript', session: { sessionId: 's', title: 't', createdAt: '', updatedAt: '', messageCount: 4 }, entries: [
    { role: 'user', text: 'explain', stopReason: 'cancelled', usage },
    { role: 'assistant', text: 'It starts by **reading**', interrupted: true },
    { role: 'user', text: 'go on', stopReason: 'end_turn', usage: { promptTokens: 10, completionTokens: 2, totalTokens: 12 } },
    { role: 'assistant', text: 'Done.' },
    { role: 'user', text: 'stored by an older daemon' },
    { role: 'assistant', text: 'Fine.' },
  ] });
  await page.waitForSelector('.markdown strong');
  const turn = (i: number) => page.locator('.turn').nth(i);
  assert.equal((await turn(0).locator('.assistant .markdown').textContent())!.trim(), 'It starts by reading');
  assert.deepEqual(await turn(0).locator('.notice').allTextContents(), ['Stopped.']);
  assert.equal(await turn(0).locator('.turn-footer').textContent(), 'Cancelled · 1,234 in · 56 out tokens');
  assert.equal(await turn(1).locator('.notice').count(), 0);
  assert.equal(await turn(1).locator('.turn-footer').textContent(), '10 in · 2 out tokens');
  assert.equal(await turn(2).locator('.turn-footer').textContent(), '', 'nothing stored, nothing shown');

  // live, the same cancelled turn reads the same
  await c.send({ type: 'turnStarted', text: 'explain' });
  await c.send(upd({ kind: 'text_delta', text: 'It starts by **reading**' }));
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'cancelled', text: '', usage } });
  assert.deepEqual(await turn(3).locator('.notice').allTextContents(), ['Stopped.']);
  assert.equal(await turn(3).locator('.turn-footer').textContent(), await turn(0).locator('.turn-footer').textContent());
});

test('a loaded session shows its plan (the transcript\'s last entry) as the card of its last turn', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'transcript', session: { sessionId: 's', title: 't', createdAt: '', updatedAt: '', messageCount: 4 }, entries: [
    { role: 'user', text: 'plan it', stopReason: 'end_turn', usage },
    { role: 'assistant', text: 'Planned.' },
    { role: 'user', text: 'go on', stopReason: 'end_turn', usage },
    { role: 'assistant', text: 'Working.' },
    { role: 'plan', text: '', entries: [{ content: 'read calc.py', priority: 'medium', status: 'completed' },
      { content: 'fix average()', priority: 'high', status: 'in_progress' }] },
  ] });
  await page.waitForSelector('.plan-card .plan-entry');
  assert.equal(await page.locator('.plan-card').count(), 1);
  assert.equal(await page.locator('.turn').nth(1).locator('.plan-card').count(), 1, 'in the last turn');
  assert.equal(await page.textContent('.plan-head'), 'Plan · 1/2 done');
});
