/**
 * The changes card in the chat webview (headless Chromium): a turn's `changes` update renders as
 * "N files changed +a −r" with its files at the end of that turn; Undo, Revert and a file click post
 * what the host needs; a restore's answer shows conflicts with their reason and a Force button.
 * A screenshot of a card with a conflict is kept as an artifact.
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ChangedFile } from '../../src/shared/checkpoints';
import type { ToWebview } from '../../src/shared/messages';
import { ChatPage, useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();

const FILES: ChangedFile[] = [
  { path: 'calc.py', uri: 'file:///w/calc.py', status: 'modified', added: 7, removed: 3 },
  { path: 'notes.md', uri: 'file:///w/notes.md', status: 'created', added: 3, removed: 0 },
  { path: 'logo.png', uri: 'file:///w/logo.png', status: 'modified' },
];

function changes(turnId: string, files: ChangedFile[]): ToWebview {
  return { type: 'update', params: { sessionId: 's', turnId, update: { kind: 'changes', files } } };
}

async function turnWithChanges(): Promise<ChatPage> {
  const c = await chat({ height: 700 });
  await c.send({ type: 'turnStarted', text: 'fix the average' });
  await c.send({ type: 'update', params: { sessionId: 's', turnId: 't-1', update: { kind: 'text_delta', text: 'Fixed it.' } } });
  await c.send(changes('t-1', FILES));
  await c.send({ type: 'turnEnded', result: { turnId: 't-1', stopReason: 'end_turn', text: 'Fixed it.',
    usage: { promptTokens: 10, completionTokens: 2, totalTokens: 12 } } });
  return c;
}

async function posted(c: ChatPage, type: string) {
  return (await c.posted()).filter((m) => m.type === type);
}

test('the card renders at the end of its turn; Undo, Revert, Diff and a file click post to the host', async () => {
  const c = await turnWithChanges();
  const { page } = c;
  const card = page.locator('.turn:last-of-type .changes-card[data-turn-id="t-1"]');
  await card.waitFor();
  assert.equal(await card.locator('.changes-summary').textContent(), '3 files changed +10 \u22123');
  assert.deepEqual(await card.locator('.changes-path').allTextContents(), ['calc.py', 'notes.md', 'logo.png']);
  assert.deepEqual(await card.locator('.changes-status').allTextContents(), ['M', 'A', 'M']);
  assert.equal(await card.locator('li[data-path="logo.png"] .diff-stat-add').textContent(), '', 'no counts for a binary file');
  const after = await page.evaluate(() => {
    const turn = document.querySelector('.turn:last-of-type .assistant')!;
    return [...turn.children].map((e) => e.className);
  });
  assert.ok(after.indexOf('changes-card') > 0, `the card follows the reply: ${after.join(', ')}`);

  await card.locator('li[data-path="calc.py"] .changes-path').click();
  assert.deepEqual(await posted(c, 'openFile'), [{ type: 'openFile', uri: 'file:///w/calc.py' }]);
  assert.deepEqual(await posted(c, 'openLink'), [], 'a file is not a link for the browser');
  await card.locator('li[data-path="notes.md"] .changes-diff').click();
  assert.deepEqual(await posted(c, 'turnDiff'), [{ type: 'turnDiff', request: { turnId: 't-1', path: 'notes.md' } }]);
  assert.deepEqual(await posted(c, 'restore'), [], 'Diff restores nothing');

  await card.locator('li[data-path="notes.md"] .changes-revert').click();
  await card.locator('.changes-undo').click();
  assert.deepEqual(await posted(c, 'restore'), [
    { type: 'restore', request: { turnId: 't-1', paths: ['notes.md'] } },
    { type: 'restore', request: { turnId: 't-1' } },
  ]);
  assert.equal(await card.locator('.changes-undo').isDisabled(), true, 'one Undo at a time');
});

test('a restore with a conflict shows its reason and Force; forcing posts force for those paths', async () => {
  const c = await turnWithChanges();
  const { page } = c;
  const card = page.locator('.changes-card[data-turn-id="t-1"]');
  await card.locator('.changes-undo').click();
  await c.send({ type: 'restoreResult', request: { turnId: 't-1' }, result: {
    restored: ['notes.md', 'logo.png'], conflicts: [{ path: 'calc.py', reason: 'changed outside ToyCoder since its last write' }],
    turnId: 'r-1', note: 'Only changes made by ToyCoder\'s file tools are undone.' } });
  assert.equal(await card.getAttribute('data-state'), 'conflicts');
  assert.equal(await card.locator('.changes-restored').textContent(), 'Restored notes.md, logo.png');
  assert.deepEqual(await card.locator('.changes-conflict').allTextContents(),
    ['calc.py: changed outside ToyCoder since its last write']);
  assert.match((await card.locator('.changes-note').textContent()) ?? '', /file tools are undone/);
  assert.equal(await card.locator('li[data-path="notes.md"] .changes-revert').isDisabled(), true, 'restored: nothing to revert');
  assert.equal(await card.locator('li[data-path="calc.py"] .changes-revert').isDisabled(), false);

  mkdirSync(ARTIFACTS, { recursive: true });
  await card.screenshot({ path: join(ARTIFACTS, 'webview-changes-card-conflict.png') });

  await card.locator('.changes-force').click();
  assert.deepEqual((await posted(c, 'restore')).slice(-1), [
    { type: 'restore', request: { turnId: 't-1', paths: ['calc.py'], force: true } },
  ]);
  // the daemon reports what the forced restore changed before its answer: a card of its own, to redo
  await c.send(changes('r-2', [{ path: 'calc.py', uri: 'file:///w/calc.py', status: 'modified', added: 3, removed: 7 }]));
  await c.send({ type: 'restoreResult', request: { turnId: 't-1', paths: ['calc.py'], force: true },
    result: { restored: ['calc.py'], conflicts: [], turnId: 'r-2', note: '' } });
  assert.equal(await card.getAttribute('data-state'), 'restored');
  assert.equal(await card.locator('.changes-conflict').count(), 0);

  const redo = page.locator('.changes-card[data-turn-id="r-2"]');
  assert.equal(await redo.locator('.changes-summary').textContent(), 'Restored: 1 file changed +3 \u22127');
  assert.equal(await redo.locator('.changes-undo').textContent(), 'Redo');
  await redo.locator('.changes-undo').click();
  assert.deepEqual((await posted(c, 'restore')).slice(-1), [{ type: 'restore', request: { turnId: 'r-2' } }]);

  await c.send({ type: 'restoreFailed', request: { turnId: 't-1' }, message: 'A turn is running: stop it first.' });
  assert.equal(await card.locator('.changes-error').textContent(), 'A turn is running: stop it first.');
});

test('a turn without changed files, or a sub-agent\'s update, adds no card', async () => {
  const c = await chat({ height: 700, ready: false });
  await c.send({ type: 'turnStarted', text: 'look around' });
  await c.send(changes('t-2', []));
  const sub = changes('t-2', FILES) as ToWebview & { type: 'update' };
  sub.params.parentToolCallId = 'call_1';
  await c.send(sub);
  assert.equal(await c.page.locator('.changes-card').count(), 0);
});

test('a loaded session shows each turn\'s changes card in that turn', async () => {
  const c = await chat({ height: 700, ready: false });
  await c.send({ type: 'transcript', session: null, entries: [
    { role: 'user', text: 'look around' },
    { role: 'assistant', text: 'Nothing to change.' },
    { role: 'user', text: 'fix the average' },
    { role: 'tool_call', text: '{}', toolCallId: 'call_1', name: 'edit_file' },
    { role: 'tool', text: 'edited calc.py', toolCallId: 'call_1', status: 'completed' },
    { role: 'assistant', text: 'Fixed it.' },
    { role: 'changes', text: '1 file changed +1 -1', turnId: 's-2', files: [FILES[0]] },
  ] });
  const placed = await c.page.evaluate(() => [...document.querySelectorAll('#conversation > .turn')].map((t) =>
    [t.querySelector('.user-message')?.textContent, t.querySelector('.changes-card')?.getAttribute('data-turn-id') ?? null]));
  assert.deepEqual(placed, [['look around', null], ['fix the average', 's-2']]);
  assert.equal(await c.page.locator('.changes-card .changes-summary').textContent(), '1 file changed +7 \u22123');
});

test('a restore the daemon marks (restoreOf: /undo typed, or a resumed session) shows Restored and Redo, never Undo', async () => {
  const c = await turnWithChanges();
  await c.send({ type: 'update', params: { sessionId: 's', turnId: 'r-9',
    update: { kind: 'changes', files: [FILES[0]], restoreOf: 't-1' } } }); // no card asked for it: /undo
  const live = c.page.locator('.changes-card[data-turn-id="r-9"]');
  assert.equal(await live.locator('.changes-summary').textContent(), 'Restored: 1 file changed +7 \u22123');
  assert.equal(await live.locator('.changes-undo').textContent(), 'Redo');

  const loaded = await chat({ height: 700, ready: false });
  await loaded.send({ type: 'transcript', session: null, entries: [
    { role: 'user', text: 'fix the average' },
    { role: 'changes', text: '1 file changed +7 -3', turnId: 's-1', files: [FILES[0]] },
    { role: 'user', text: '/undo' },
    { role: 'changes', text: 'restored (1 file changed +3 -7)', turnId: 's-2', files: [FILES[0]], restoreOf: 's-1' },
  ] });
  const buttons = await loaded.page.locator('.changes-card .changes-undo').allTextContents();
  assert.deepEqual(buttons, ['Undo', 'Redo']);
});
