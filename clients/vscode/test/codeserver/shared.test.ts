/**
 * The slow tier, issue 32 ("One session in many editors, live"): one session in real VS Code
 * (code-server with the .vsix, Chromium) and a real headless Neovim with our plugin, each with its
 * own daemon on the same workspace, data dir and runtime dir.
 *
 * Neovim makes the session; VS Code resumes it with ToyCoder: Switch Session. Then a turn in each,
 * the other watching:
 * - Neovim's turn streams slowly: its words appear in VS Code's chat while Neovim still streams them,
 *   under "Running in toycoder.nvim"; its write is asked in both editors, VS Code approves it and
 *   Neovim's permission window closes; VS Code's clean editor of that file
 *   shows the new text, its editor with unsaved work stays as it is, with one notice whose only action
 *   is Compare (the editor's text beside the disk).
 * - VS Code's turn streams slowly into Neovim ("running in toycoder-vscode"); Neovim approves its write
 *   and VS Code's card becomes a record of that ("in toycoder.nvim"); Neovim
 *   reloads its clean buffer of a file written on disk while the turn runs, and, at the turn's end, of
 *   the file VS Code edited in its clean editor and saved; Neovim's buffer with unsaved work of a file
 *   VS Code edited in its own dirty editor (the disk untouched) gets no notice at all.
 *
 * The two-Neovim version is tests/editors/neovim/test_neovim_shared.py (the default editors tier).
 */

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { Frame, Page } from 'playwright-core';
import { chatFrame, CodeServer, openFile, plain, runCommand, startCodeServer } from '../helpers/codeServer';
import { FakeLlm, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';
import { HeadlessNeovim } from '../helpers/neovim';

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
});

const words = (prefix: string) => Array.from({ length: 60 }, (_, i) => `${prefix}${i + 1}`);
const NV_WORDS = words('nv');
const CS_WORDS = words('cs');
const APP_NV = 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n';
const APP_CS = 'def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n';
const README_NV = '# Demo\nRewritten from Neovim.\n';
const README_CS = '# Demo\nRewritten from VS Code.\n';
const CALC_CS = 'X = 2\n';

/** The words of `vocabulary` in `text`, in order. */
function wordsIn(text: string, vocabulary: string[]): string[] {
  const known = new Set(vocabulary);
  return (text.match(/\b[a-z]+\d+\b/g) ?? []).filter((w) => known.has(w));
}

/** What the last turn of VS Code's chat shows as the assistant's. */
async function lastReply(frame: Frame): Promise<string> {
  const turn = frame.locator('#conversation > .turn').last();
  return (await turn.count()) ? plain(await turn.locator('.assistant').textContent()) : '';
}

/** Poll an async check until it is truthy (or fail with `what`). */
async function until<T>(check: () => Promise<T | undefined | null | false>, what: string, timeoutMs = 120000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The text of the active editor of VS Code (Monaco renders only what is on screen: short files here). */
async function activeEditorText(page: Page): Promise<string> {
  return plain(await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().textContent());
}

test('one session in Neovim and VS Code: each turn streams live into the other editor, is approved there, and the other editor reloads clean files and keeps dirty ones without a false warning', { timeout: 25 * 60 * 1000 }, async () => {
  const ws = makeWorkspace('toycoder-shared-');
  const app = join(ws.root, 'src', 'app.py');
  const readme = join(ws.root, 'README.md');
  const calc = join(ws.root, 'src', 'calc.py');
  writeFileSync(calc, 'X = 1\n');
  const llm: FakeLlm = await startFakeLlm(ws.dir, [
    { text: 'Noted.' },
    // Neovim's turn
    { text: NV_WORDS.join(' ') + '\n', chunk_size: 5, chunk_delay: 0.15,
      tool_calls: [{ name: 'write_file', arguments: { path: 'src/app.py', content: APP_NV } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'README.md', content: README_NV } }] },
    { text: 'Written from Neovim.' },
    // VS Code's turn
    { text: CS_WORDS.join(' ') + '\n', chunk_size: 5, chunk_delay: 0.15,
      tool_calls: [{ name: 'write_file', arguments: { path: 'src/app.py', content: APP_CS } }] },
    { tool_calls: [{ name: 'write_file', arguments: { path: 'src/calc.py', content: CALC_CS } },
      { name: 'write_file', arguments: { path: 'README.md', content: README_CS } }] },
    { text: 'Written from VS Code.' },
  ]);
  cleanups.push(() => llm.stop());
  // src/app.py is each turn's one permission request; the other writes need none
  const config = writeConfig(ws, llm.baseUrl, "permissions: {allow: ['write_file(README.md)', 'write_file(src/calc.py)']}\n");

  const nvim = await HeadlessNeovim.start(ws, config);
  cleanups.push(() => nvim.stop());
  const cs: CodeServer = await startCodeServer(ws, config);
  cleanups.push(() => cs.stop());
  const { page, shot } = cs;
  const describe = () => {
    try {
      return `--- Neovim's chat:\n${nvim.chat()}\n--- Neovim's notes: ${JSON.stringify(nvim.notes())}`;
    } catch (e) {
      return `--- Neovim does not answer: ${String(e)}`;
    }
  };
  try {
    // ---- Neovim makes the session ------------------------------------------------------------
    nvim.command('ToyCoder remember the word banana');
    await waitFor(() => !nvim.busy() && nvim.chat().includes('Noted.'), 'the first turn in Neovim', 120000);
    const session = nvim.lua<string>("return require('toycoder').session_id()");
    assert.ok(session);

    // ---- VS Code: README.md with unsaved work, src/app.py clean and in front; the session resumed
    await runCommand(page, 'ToyCoder: Open Chat');
    const frame = await chatFrame(page);
    await frame.waitForSelector('body[data-daemon="ready"]', { timeout: 120000 }); // the panel heard the daemon is ready
    await openFile(page, 'README.md');
    await page.locator('.editor-group-container.active .monaco-editor .view-lines').first().click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('# mine');
    await page.locator('.tab.dirty', { hasText: 'README.md' }).waitFor({ timeout: 30000 });
    await openFile(page, 'src/app.py');
    await runCommand(page, 'ToyCoder: Switch Session');
    await page.locator('.quick-input-widget input').fill(session);
    await page.locator('.quick-input-list .monaco-list-row', { hasText: session }).first().waitFor({ timeout: 30000 });
    await page.keyboard.press('Enter');
    const chat = await chatFrame(page);
    await chat.locator('.user-message', { hasText: 'remember the word banana' }).waitFor({ timeout: 60000 });

    // ---- a turn in Neovim, watched in VS Code ------------------------------------------------
    nvim.command('ToyCoder tell a story, then add sub()');
    const seen = await until(async () => {
      const shown = wordsIn(await lastReply(chat), NV_WORDS);
      if (shown.length < 3 || shown.length >= NV_WORDS.length) return undefined;
      return wordsIn(nvim.chat(), NV_WORDS).length < NV_WORDS.length ? shown : undefined; // Neovim still streams
    }, 'Neovim\'s words in VS Code while Neovim streams them');
    assert.deepEqual(seen, NV_WORDS.slice(0, seen.length), 'in order');
    assert.equal(await chat.textContent('#status'), 'Running in toycoder.nvim');
    assert.equal(plain(await chat.locator('#conversation > .turn').last().locator('.user-message').textContent()).trim(),
      'tell a story, then add sub()');
    await shot('code-server-shared-streaming.png');

    // Neovim's write is asked in both editors: VS Code approves it, Neovim's window closes
    await waitFor(() => nvim.lua<boolean>('return T.review_armed()'), 'Neovim\'s permission window', 120000);
    const asked = chat.locator('.permission-card');
    await asked.waitFor({ timeout: 120000 });
    assert.equal(await asked.locator('.permission-question').textContent(), 'ToyCoder wants to run write_file src/app.py');
    assert.equal(await chat.textContent('#status'), 'Waiting for approval in toycoder.nvim');
    await asked.locator('button.permission-allow').click();
    await waitFor(() => !nvim.lua<boolean>('return T.review_armed()'), 'Neovim\'s window to close once VS Code answered', 120000);
    const approved = chat.locator('.permission-record').last();
    await approved.waitFor({ timeout: 60000 });
    assert.equal(plain(await approved.textContent()), '\u2713Allowed once: write_file src/app.py');

    // VS Code's clean editor of src/app.py shows the new text; README.md keeps the unsaved work
    await until(async () => (await activeEditorText(page)).includes('def sub(a, b):'), 'VS Code\'s clean editor to show the written file');
    await waitFor(() => !nvim.busy(), 'Neovim\'s turn to end', 120000);
    await chat.locator('.assistant', { hasText: 'Written from Neovim.' }).waitFor({ timeout: 60000 });
    await until(async () => (await chat.textContent('#status')) === '', '"Running in" to go');
    assert.equal(readFileSync(app, 'utf8'), APP_NV);
    assert.equal(readFileSync(readme, 'utf8'), README_NV);
    assert.equal(await page.locator('.tab.dirty', { hasText: 'app.py' }).count(), 0, 'src/app.py is clean');
    assert.equal(await page.locator('.tab.dirty', { hasText: 'README.md' }).count(), 1, 'README.md keeps its unsaved work');
    // one notice that harms nothing: it offers a diff with the disk, nothing that drops the unsaved work
    const notice = page.locator('.notification-toast', { hasText: 'README.md changed on disk' });
    await notice.waitFor({ timeout: 30000 });
    assert.equal(await notice.count(), 1);
    assert.match(plain(await notice.textContent()), /the editor's unsaved changes were kept/);
    assert.deepEqual(await notice.locator('.monaco-button').allTextContents(), ['Compare']);
    assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'no dialog');
    await notice.locator('.monaco-button', { hasText: 'Compare' }).click();
    const compare = page.locator('.monaco-diff-editor').first();
    await compare.waitFor({ timeout: 30000 });
    // side by side or inline (a narrow editor): the disk's text and the unsaved one
    await until(async () => {
      const shown = plain(await compare.textContent());
      return shown.includes('Rewritten from Neovim.') && shown.includes('# mine');
    }, 'the disk beside the unsaved text');
    await shot('code-server-shared-compare.png');
    // closed with its tab's close button: the unsaved document stays open in its own tab
    const compareTab = page.locator('.tab', { hasText: '\u2194' }).first();
    await compareTab.hover();
    await compareTab.locator('.tab-actions .action-label').first().click();
    await compareTab.waitFor({ state: 'detached', timeout: 30000 });
    assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'no dialog');
    assert.equal(await page.locator('.tab.dirty', { hasText: 'README.md' }).count(), 1, 'the unsaved work is still there');
    const nvimTurn = plain(await chat.locator('#conversation > .turn').last().textContent());
    assert.ok(nvimTurn.includes(NV_WORDS.join(' ')), nvimTurn);
    await shot('code-server-shared-after-neovim.png');

    // ---- a turn in VS Code, watched in Neovim ------------------------------------------------
    // Neovim: src/app.py and src/calc.py clean, README.md with unsaved work
    nvim.command('edit README.md');
    nvim.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'my unsaved words'})");
    nvim.command('edit src/calc.py');
    nvim.command('edit src/app.py');
    assert.ok(nvim.modified(readme) && !nvim.modified(app) && !nvim.modified(calc));
    await chat.fill('#prompt', 'tell another story, then add mul()');
    await chat.press('#prompt', 'Enter');
    const heard = await until(async () => {
      const shown = wordsIn(nvim.chat(), CS_WORDS);
      if (shown.length < 3 || shown.length >= CS_WORDS.length) return undefined;
      return wordsIn(await lastReply(chat), CS_WORDS).length < CS_WORDS.length ? shown : undefined; // VS Code still streams
    }, 'VS Code\'s words in Neovim while VS Code streams them');
    assert.deepEqual(heard, CS_WORDS.slice(0, heard.length), 'in order');
    assert.equal(nvim.statusline(), 'ToyCoder: running in toycoder-vscode');
    assert.ok(nvim.chat().includes('## You\n\ntell another story, then add mul()'), describe());

    // VS Code's write is asked in both editors: Neovim approves it, VS Code's card records where
    const card = chat.locator('.permission-card');
    await card.waitFor({ timeout: 120000 });
    await waitFor(() => nvim.lua<boolean>('return T.review_armed()'), 'Neovim\'s permission window', 120000);
    assert.equal(nvim.statusline(), 'ToyCoder: waiting for approval in toycoder-vscode');
    nvim.keys('a');
    const decided = chat.locator('.permission-record', { hasText: 'toycoder.nvim' });
    await decided.waitFor({ timeout: 120000 });
    assert.equal(plain(await decided.textContent()), '\u2713Allowed once (in toycoder.nvim): write_file src/app.py');
    assert.equal(await chat.locator('.permission-card').count(), 0, 'no card left open');

    // src/calc.py, written on disk, reloads in Neovim while the turn runs; src/app.py, edited in VS Code's
    // clean editor and saved there, by the turn's end
    await waitFor(() => nvim.buffer(calc).join('\n') === CALC_CS.trimEnd(), 'Neovim to reload src/calc.py', 120000);
    await chat.locator('.assistant', { hasText: 'Written from VS Code.' }).waitFor({ timeout: 120000 });
    await waitFor(() => nvim.statusline() === '', '"running in" to go in Neovim', 120000);
    await waitFor(() => nvim.buffer(app).join('\n') === APP_CS.trimEnd(), 'Neovim to reload src/app.py', 60000);
    assert.equal(readFileSync(app, 'utf8'), APP_CS);
    assert.equal(readFileSync(calc, 'utf8'), CALC_CS);
    const nvimChat = nvim.chat();
    assert.ok(nvimChat.includes(CS_WORDS.join(' ')) && nvimChat.includes('Written from VS Code.'), describe());
    for (const path of ['src/app.py', 'src/calc.py', 'README.md']) {
      assert.ok(nvimChat.includes(`- [ok] write_file ${path}`), `${path}: ${describe()}`);
    }
    // README.md: the edit went into VS Code's dirty editor; the disk did not change, Neovim says nothing
    assert.equal(readFileSync(readme, 'utf8'), README_NV);
    assert.deepEqual(nvim.buffer(readme), ['# Demo', 'my unsaved words']);
    assert.ok(nvim.modified(readme) && !nvim.modified(app) && !nvim.modified(calc));
    assert.deepEqual(nvim.notes().filter((n) => n.includes('README.md') || n.includes(':e!')), [], describe());
    await page.locator('.tab', { hasText: 'README.md' }).first().click();
    await page.locator('.tab.active', { hasText: 'README.md' }).waitFor({ timeout: 30000 });
    assert.ok((await activeEditorText(page)).includes('Rewritten from VS Code.'), 'the edit is in VS Code\'s buffer');
    assert.equal(await page.locator('.tab.dirty', { hasText: 'README.md' }).count(), 1, 'which stays unsaved');
    await shot('code-server-shared-after-vscode.png');
    assert.deepEqual(llm.violations(), []);
  } catch (e) {
    await shot('code-server-shared-failure.png');
    process.stdout.write(`# code-server log:\n${cs.log().split('\n').slice(-40).map((l) => `# ${l}`).join('\n')}\n`);
    process.stdout.write(`# Neovim:\n${describe().split('\n').map((l) => `# ${l}`).join('\n')}\n`);
    throw e;
  }
});
