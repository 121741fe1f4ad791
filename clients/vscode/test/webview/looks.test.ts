/**
 * How the chat looks, in headless Chromium with VS Code's default webview styles loaded first:
 * code blocks (no per-line box, highlighted tokens, Copy / Insert), the prompt as Markdown, restored
 * tool cards equal to live ones, the footer of a cancelled turn, and every pill and badge at
 * >= 4.5:1 contrast in Dark Modern, Light Modern and Dark High Contrast (screenshot artifacts).
 */

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import type { ToWebview } from '../../src/shared/messages';
import type { PermissionParams, TranscriptEntry, Update } from '../../src/shared/protocol';
import { useChats } from '../helpers/browser';
import { ARTIFACTS } from '../helpers/env';

const chat = useChats();

const upd = (update: Update): ToWebview => ({ type: 'update', params: { sessionId: 's', turnId: 's-1', update } });
const text = (t: string) => upd({ kind: 'text_delta', text: t });
const usage = { promptTokens: 1234, completionTokens: 56, totalTokens: 1290 };
const PYTHON = 'def average(numbers):\n    # the mean\n    return sum(numbers) / len(numbers)\n\nprint(average([2, 4, 6]), "ok")\n';

test('code blocks: no box behind each line, highlighted tokens, Copy and Insert', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix it' });
  await c.send(text(`Here:\n\n\`\`\`python\n${PYTHON}\`\`\`\n\nand plain:\n\n\`\`\`\nmake test\n\`\`\`\n`));
  await page.waitForFunction(() => document.querySelectorAll('.code-block').length === 2);
  const styles = await page.evaluate(() => [...document.querySelectorAll('.code-block pre code')].map((el) => {
    const s = getComputedStyle(el);
    return { bg: s.backgroundColor, padding: s.paddingLeft, radius: s.borderTopLeftRadius };
  }));
  for (const s of styles) assert.deepEqual(s, { bg: 'rgba(0, 0, 0, 0)', padding: '0px', radius: '0px' }, 'VS Code\'s `code` box is reset');
  // the defaults are really loaded: inline code keeps VS Code's preformat background
  await c.send(text('Inline `x`.'));
  await page.waitForSelector('.markdown p code');
  assert.notEqual(await page.evaluate(() => getComputedStyle(document.querySelector('.markdown p code')!).backgroundColor), 'rgba(0, 0, 0, 0)');

  const block = page.locator('.code-block').first();
  assert.equal(await block.locator('code.hljs.language-python').count(), 1);
  assert.deepEqual(await block.locator('.hljs-keyword').allTextContents(), ['def', 'return']);
  assert.equal(await block.locator('.hljs-comment').textContent(), '# the mean');
  assert.equal(await block.locator('.hljs-string').textContent(), '"ok"');
  const keywordColour = await block.locator('.hljs-keyword').first().evaluate((el) => getComputedStyle(el).color);
  const plainColour = await block.locator('code').evaluate((el) => getComputedStyle(el).color);
  assert.notEqual(keywordColour, plainColour, 'tokens are coloured');
  assert.equal(await block.locator('code').textContent(), PYTHON, 'the code itself is unchanged');
  assert.equal(await page.locator('.code-block').nth(1).locator('[class^="hljs"]').count(), 0, 'no guessing without a language');

  await block.locator('button.code-copy').click();
  await page.locator('.code-block').nth(1).locator('button.code-insert').click();
  const posted = (await c.posted()).filter((m) => m.type === 'copyCode' || m.type === 'insertCode');
  assert.deepEqual(posted, [{ type: 'copyCode', text: PYTHON }, { type: 'insertCode', text: 'make test\n' }]);
  assert.equal(await block.locator('button.code-copy').textContent(), 'Copied');
});

test('the person\'s prompt is Markdown; a slash command stays as typed', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'Why does **this** fail?\n```python\nprint(1 / 0)\n```' });
  const user = page.locator('.user-message');
  assert.equal(await user.locator('strong').textContent(), 'this');
  assert.equal(await user.locator('.code-block code.language-python').textContent(), 'print(1 / 0)\n');
  assert.ok(!(await user.textContent())!.includes('```'), 'no literal fence');
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: 'ok', usage } });
  await c.send({ type: 'turnStarted', text: '/title **x**' });
  assert.equal(await page.locator('.user-message.command').textContent(), '/title **x**');
});

test('a cancelled turn\'s footer: its tokens, or "Cancelled" without 0 in · 0 out', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'long job' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'cancelled', text: '', usage } });
  assert.equal(await page.textContent('.turn-footer'), 'Cancelled · 1,234 in · 56 out tokens');
  assert.equal(await page.textContent('#usage'), 'Cancelled · 1,234 in · 56 out tokens');
  await c.send({ type: 'turnStarted', text: 'again' });
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'cancelled', text: '',
    usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 } } });
  assert.equal(await page.locator('.turn-footer').nth(1).textContent(), 'Cancelled');
  assert.equal(await page.textContent('#usage'), 'Cancelled');
});

test('a reloaded cancelled reply reads as it did live: no marker text, the Stopped notice', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'transcript', session: { sessionId: 's', title: 't', createdAt: '', updatedAt: '', messageCount: 2 }, entries: [
    { role: 'user', text: 'explain' },
    { role: 'assistant', text: 'It starts by **reading**\n[interrupted by the user]' },
    { role: 'user', text: 'go on' },
    { role: 'assistant', text: 'Done [interrupted by the user] is quoted here.' },
  ] });
  await page.waitForSelector('.markdown strong');
  const first = page.locator('.turn').first();
  assert.equal((await first.locator('.assistant .markdown').textContent())!.trim(), 'It starts by reading');
  assert.equal(await first.locator('.notice.cancelled').textContent(), 'Stopped.');
  assert.ok(!(await first.textContent())!.includes('[interrupted'), 'the marker is not shown');
  assert.equal(await page.locator('.turn').nth(1).locator('.notice').count(), 0, 'only a trailing marker counts');
});

// ---- restored cards ------------------------------------------------------------------------------

/** Tool calls as the daemon sends them live: its titles (toycoder_daemon/tools) and levels. */
const CALLS: Array<{ id: string; name: string; args: Record<string, unknown>; title: string; level: 'safe' | 'sensitive' | 'dangerous';
  status: 'completed' | 'failed' | 'denied' | 'cancelled' | null; output: string }> = [
  { id: 'c1', name: 'read_file', args: { path: 'calc.py' }, title: 'read_file calc.py', level: 'safe', status: 'completed', output: 'def average' },
  { id: 'c2', name: 'list_directory', args: {}, title: 'list_directory .', level: 'safe', status: 'completed', output: 'calc.py' },
  { id: 'c3', name: 'grep_search', args: { pattern: 'len\\(', path: '.' }, title: 'grep_search len\\(', level: 'safe', status: 'completed', output: 'calc.py:2' },
  { id: 'c4', name: 'edit_file', args: { path: 'calc.py', old_string: 'a', new_string: 'b' }, title: 'edit_file calc.py', level: 'sensitive', status: 'failed', output: 'old_string not found' },
  { id: 'c5', name: 'write_file', args: { path: 'tests/t.py', content: 'x' }, title: 'write_file tests/t.py', level: 'sensitive', status: 'denied', output: 'The user did not allow this.' },
  { id: 'c6', name: 'run_command', args: { command: 'pytest   -q\n  tests' }, title: 'run_command pytest -q tests', level: 'dangerous', status: 'completed', output: 'exit 0' },
  { id: 'c7', name: 'planner', args: { query: 'Add\nsubtract()' }, title: 'planner: Add subtract()', level: 'safe', status: 'completed', output: '1. Read' },
  { id: 'c8', name: 'ask_user', args: { question: 'Which file?', options: ['a', 'b'] }, title: 'ask_user Which file?', level: 'safe', status: 'completed', output: 'a' },
  { id: 'c9', name: 'mcp__docs__search', args: { q: 'x' }, title: 'mcp docs/search', level: 'safe', status: 'completed', output: 'found' },
  { id: 'c10', name: 'glob_search', args: { pattern: '**/*.py' }, title: 'glob_search **/*.py', level: 'safe', status: null, output: '' },
];

function cards(page: Page): Promise<unknown[]> {
  return page.evaluate(() => [...document.querySelectorAll<HTMLElement>('.tool-card')].map((el) => ({
    id: el.dataset.toolCallId,
    status: el.dataset.status,
    permission: el.dataset.permission,
    title: el.querySelector('.tool-title')?.textContent,
    pill: el.querySelector('.tool-status')?.textContent,
    args: el.querySelector('.tool-args')?.textContent,
    output: el.querySelector('.tool-output')?.textContent,
    outputShown: !(el.querySelector('.tool-output')?.parentElement as HTMLElement).hidden,
  })));
}

test('restored tool cards equal the live ones: titles, statuses, levels, arguments, output', async () => {
  const c = await chat();
  const { page } = c;
  await c.send({ type: 'turnStarted', text: 'fix calc' });
  for (const call of CALLS) {
    await c.send(upd({ kind: 'tool_call', toolCallId: call.id, name: call.name, title: call.title, arguments: call.args, permission: call.level }));
    if (call.status) await c.send(upd({ kind: 'tool_result', toolCallId: call.id, status: call.status, output: call.output }));
  }
  await c.send({ type: 'turnEnded', result: { turnId: 't', stopReason: 'end_turn', text: 'done', usage } });
  const live = await cards(page);
  assert.equal(live.length, CALLS.length);

  const entries: TranscriptEntry[] = [{ role: 'user', text: 'fix calc' }];
  for (const call of CALLS) {
    entries.push({ role: 'tool_call', text: JSON.stringify(call.args), toolCallId: call.id, name: call.name });
    // a success is stored without a status by older daemons: both forms restore the same
    if (call.status) entries.push({ role: 'tool', text: call.output, toolCallId: call.id, name: call.name,
      ...(call.status === 'completed' && call.id === 'c1' ? {} : { status: call.status }) });
  }
  entries.push({ role: 'assistant', text: 'done' });
  await c.send({ type: 'transcript', session: { sessionId: 's', title: 't', createdAt: '', updatedAt: '', messageCount: 3 }, entries });
  const restored = await cards(page);
  assert.deepEqual(restored, live);
  assert.deepEqual((restored as Array<{ title: string }>).map((r) => r.title), CALLS.map((call) => call.title));
  assert.equal((restored[CALLS.length - 1] as { status: string }).status, 'interrupted', 'a call without a result was cut off');
});

// ---- contrast --------------------------------------------------------------------------------------

const PERMISSION: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'p1', tool: 'run_command', level: 'dangerous', title: 'run_command make',
  arguments: { command: 'make' }, preview: { kind: 'command', command: 'make', cwd: '/work/proj' },
};

/** WCAG contrast of each pill's text against what is behind it (alpha composited up the tree). */
function pillContrasts(page: Page): Promise<Array<{ what: string; ratio: number; fg: string; bg: string }>> {
  return page.evaluate(() => {
    type RGBA = [number, number, number, number];
    const parse = (c: string): RGBA => {
      const m = c.match(/[\d.]+/g)!.map(Number);
      return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1];
    };
    const over = (top: RGBA, under: RGBA): RGBA => {
      const a = top[3] + under[3] * (1 - top[3]);
      if (a === 0) return [0, 0, 0, 0];
      const ch = (i: number) => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a;
      return [ch(0), ch(1), ch(2), a];
    };
    const background = (el: Element | null): RGBA => {
      const layers: RGBA[] = [];
      for (let e = el; e; e = e.parentElement) layers.push(parse(getComputedStyle(e).backgroundColor));
      let acc: RGBA = [255, 255, 255, 1]; // the iframe's canvas
      for (const layer of layers.reverse()) acc = over(layer, acc);
      return acc;
    };
    const lum = (c: RGBA) => {
      const f = (v: number) => { const s = v / 255; return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4; };
      return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
    };
    const pills = document.querySelectorAll<HTMLElement>('.tool-status, .permission-level, .code-actions button');
    return [...pills].map((el) => {
      const bg = background(el);
      const fg = over(parse(getComputedStyle(el).color), bg);
      const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
      const card = el.closest<HTMLElement>('[data-status]');
      return { what: `${el.className} ${card?.dataset.status ?? ''} ${el.textContent}`, ratio: (hi + 0.05) / (lo + 0.05),
        fg: fg.map(Math.round).join(','), bg: bg.map(Math.round).join(',') };
    });
  });
}

for (const theme of ['dark', 'light', 'high-contrast'] as const) {
  test(`every pill and badge reads at >= 4.5:1 in ${theme} (screenshot artifact)`, async () => {
    const c = await chat({ theme, height: 1000 });
    const { page } = c;
    await c.send({ type: 'turnStarted', text: 'Show me **average** in `calc.py`' });
    await c.send(text(`It divides by the wrong length:\n\n\`\`\`python\n${PYTHON}\`\`\`\n`));
    const statuses = ['completed', 'failed', 'denied', 'cancelled'] as const;
    for (const [i, status] of statuses.entries()) {
      const call = CALLS[i];
      await c.send(upd({ kind: 'tool_call', toolCallId: call.id, name: call.name, title: call.title, arguments: call.args, permission: call.level }));
      await c.send(upd({ kind: 'tool_result', toolCallId: call.id, status, output: call.output }));
    }
    for (const level of ['safe', 'sensitive', 'dangerous'] as const) {
      await c.send({ type: 'permission', id: `r-${level}`, params: { ...PERMISSION, toolCallId: `p-${level}`, level } });
    }
    await c.send(upd({ kind: 'tool_call', toolCallId: 'run', name: 'run_command', title: 'run_command pytest -q', arguments: { command: 'pytest -q' }, permission: 'dangerous' }));
    await page.waitForSelector('.hljs-keyword');
    const found = await pillContrasts(page);
    const kinds = new Set(found.map((f) => f.what.split(' ').slice(0, 2).join(' ')));
    for (const want of ['tool-status running', 'tool-status completed', 'tool-status failed', 'tool-status denied',
      'tool-status cancelled', 'permission-level level-safe', 'permission-level level-sensitive',
      'permission-level level-dangerous', 'code-copy ', 'code-insert ']) {
      assert.ok([...kinds].some((k) => `${k} `.startsWith(want)), `${want} is measured (${[...kinds].join('; ')})`);
    }
    const low = found.filter((f) => f.ratio < 4.5);
    assert.deepEqual(low, [], `pills under 4.5:1 in ${theme}`);
    mkdirSync(ARTIFACTS, { recursive: true });
    const file = join(ARTIFACTS, `webview-looks-${theme}.png`);
    await page.locator('.tool-card').first().scrollIntoViewIfNeeded();
    await page.screenshot({ path: file, fullPage: false });
    process.stdout.write(`# screenshot: ${file} (lowest contrast ${Math.min(...found.map((f) => f.ratio)).toFixed(2)}:1)\n`);
  });
}
