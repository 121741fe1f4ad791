/**
 * `@` mentions and context chips in the chat webview (headless Chromium, issue 29): typing `@cal` asks
 * the host for mentions, the host's items (toycoder/mentions/complete) are listed, picking one puts the
 * mention in the prompt; the chips of the next prompt's attachments show and each × asks to remove it.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { useChats } from '../helpers/browser';

const chat = useChats();

test('typing @cal lists calc.py from the host, picking it inserts the mention', async () => {
  const c = await chat();
  const { page } = c;
  await page.click('#prompt');
  await page.keyboard.type('explain @cal');
  // the webview asks for each prefix as it is typed; the last ask is the one the list answers
  const asks = (await c.posted()).filter((m) => m.type === 'mentions');
  assert.deepEqual(asks.at(-1), { type: 'mentions', prefix: 'cal' });
  assert.deepEqual(asks.map((m) => m.type === 'mentions' && m.prefix), ['', 'c', 'ca', 'cal']);
  // an answer to an older prefix is not shown
  await c.send({ type: 'mentionItems', prefix: 'ca', items: [{ label: 'cat.py', kind: 'file', uri: 'file:///w/cat.py' }] });
  assert.equal(await page.isVisible('#completions'), false, 'a stale answer opened the list');
  await c.send({ type: 'mentionItems', prefix: 'cal', items: [
    { label: 'calc.py', kind: 'file', uri: 'file:///w/calc.py' },
    { label: 'calendar/', kind: 'folder', uri: 'file:///w/calendar' },
  ] });
  await page.waitForSelector('#completions:not([hidden])');
  assert.deepEqual(await page.locator('#completions .completion-usage').allTextContents(), ['@calc.py', '@calendar/']);
  assert.deepEqual(await page.locator('#completions .completion-help').allTextContents(), ['file', 'folder']);
  assert.equal(await page.locator('#completions .completion.selected .completion-usage').textContent(), '@calc.py');
  await page.keyboard.press('Enter'); // picks, does not send
  assert.equal(await page.inputValue('#prompt'), 'explain @calc.py ');
  assert.equal(await page.isVisible('#completions'), false);
  assert.equal((await c.posted()).filter((m) => m.type === 'prompt').length, 0, 'picking sent the prompt');
  await page.keyboard.type('please');
  await page.keyboard.press('Enter');
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'prompt'), [{ type: 'prompt', text: 'explain @calc.py please' }]);
});

test('a mention picked with the mouse, and a folder goes on into it', async () => {
  const c = await chat();
  const { page } = c;
  await page.click('#prompt');
  await page.keyboard.type('@cal');
  await c.send({ type: 'mentionItems', prefix: 'cal', items: [
    { label: 'calc.py', kind: 'file', uri: 'file:///w/calc.py' },
    { label: 'calendar/', kind: 'folder', uri: 'file:///w/calendar' },
  ] });
  await page.waitForSelector('#completions:not([hidden])');
  await page.locator('#completions .completion').nth(1).dispatchEvent('mousedown');
  assert.equal(await page.inputValue('#prompt'), '@calendar/');
  // a folder: the webview asks at once for what is in it
  const asks = (await c.posted()).filter((m) => m.type === 'mentions');
  assert.deepEqual(asks.at(-1), { type: 'mentions', prefix: 'calendar/' });
});

test('chips show the next prompt\'s attachments and each × asks the host to remove it', async () => {
  const c = await chat();
  const { page } = c;
  assert.equal(await page.isVisible('#chips'), false, 'no chips without attachments');
  await c.send({ type: 'chips', labels: ['calc.py:1-3', 'screenshot.png'] });
  await page.waitForSelector('#chips:not([hidden])');
  assert.deepEqual(await page.locator('#chips .chip').evaluateAll((els) => els.map((e) => e.firstChild?.textContent)),
    ['calc.py:1-3', 'screenshot.png']);
  await page.click('#chips .chip-remove[aria-label="Remove screenshot.png"]');
  assert.deepEqual((await c.posted()).filter((m) => m.type === 'removeChip'), [{ type: 'removeChip', index: 1 }]);
  // the host answers with what is left; then with nothing, and the row hides
  await c.send({ type: 'chips', labels: ['calc.py:1-3'] });
  assert.equal(await page.locator('#chips .chip').count(), 1);
  await c.send({ type: 'chips', labels: [] });
  assert.equal(await page.isVisible('#chips'), false);
});
