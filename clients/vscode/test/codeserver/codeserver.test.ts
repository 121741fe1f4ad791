/**
 * The slow tier: the packaged .vsix in real VS Code (code-server 4.139.1 = VS Code 1.139.1), driven
 * by playwright-core + Debian's Chromium. Open the panel, send a prompt; the 120-line proposal is a
 * card in the chat, read to its last line there and in the diff editor while the request waits
 * (no modal); with the panel hidden a status-bar item brings the card back; Accept in the diff
 * editor's title bar writes the file and closes the diff tab; the card becomes a record; Undo on
 * the turn's changes card removes the file again. Then an edit to a file open in the editor with
 * unsaved changes (workspace/applyEdit) lands in its buffer, which stays unsaved, and Ctrl+Z undoes it.
 * `npm run test:codeserver` installs code-server into .cache/ first (minutes, once).
 */

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chatFrame, CodeServer, openFile, plain, runCommand, startCodeServer } from '../helpers/codeServer';
import { FakeLlm, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void> | void> = [];
after(async () => {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => undefined);
});

const TABLE = Array.from({ length: 120 }, (_, i) => `ROWS.append(${i + 1})  # row ${i + 1}`).join('\n') + '\n';

test('real VS Code: inline review card, non-blocking diff, Accept from the diff editor\'s title bar, Undo, edit of a dirty buffer', { timeout: 25 * 60 * 1000 }, async () => {
  // ---- a workspace, the scripted model, settings -------------------------------------------------
  const ws = makeWorkspace('toycoder-codeserver-');
  const llm: FakeLlm = await startFakeLlm(ws.dir, [
    { text: "I'll write the table to `src/table.py`.\n", chunk_size: 4, chunk_delay: 0.01,
      tool_calls: [{ name: 'write_file', arguments: { path: 'src/table.py', content: TABLE } }] },
    { text: 'Done: **`src/table.py` has 120 rows**.', chunk_size: 3, chunk_delay: 0.02 },
    { tool_calls: [{ name: 'edit_file', arguments: { path: 'src/app.py', old_string: 'return a + b', new_string: 'return b + a' } }] },
    { text: 'Swapped the operands.', expect: { last_tool_contains: "in the editor's buffer" } },
  ]);
  cleanups.push(() => llm.stop());
  const config = writeConfig(ws, llm.baseUrl);
  const cs: CodeServer = await startCodeServer(ws, config);
  cleanups.push(() => cs.stop());
  const { page, shot } = cs;
  try {
    // open the chat (in the secondary side bar) from the command palette
    await runCommand(page, 'ToyCoder: Open Chat');
    const frame = await chatFrame(page);
    await frame.waitForSelector('body[data-daemon="ready"]', { timeout: 60000 }); // the panel heard the daemon is ready
    await frame.fill('#prompt', 'Write the table module');
    await frame.press('#prompt', 'Enter');

    // the request is a card in the chat, not a modal
    const card = frame.locator('.permission-card');
    await card.waitFor({ timeout: 60000 });
    assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'no modal');
    assert.equal(await card.locator('.permission-question').textContent(), 'ToyCoder wants to run write_file src/table.py');
    assert.equal(await card.locator('.diff-line.diff-add').count(), 120);
    // read it to the last line with the mouse wheel, in the card
    const lastVisible = () => card.evaluate((el) => {
      const box = el.querySelector('.diff')!.getBoundingClientRect();
      const last = el.querySelector('.diff .diff-line:last-child')!.getBoundingClientRect();
      const conv = document.getElementById('conversation')!.getBoundingClientRect();
      return last.top >= box.top - 1 && last.bottom <= box.bottom + 1 && last.top >= conv.top - 1 && last.bottom <= conv.bottom + 1;
    });
    await card.locator('.diff').scrollIntoViewIfNeeded();
    const diffBox = (await card.locator('.diff').boundingBox())!;
    await page.mouse.move(diffBox.x + diffBox.width / 2, diffBox.y + Math.min(diffBox.height / 2, 40));
    for (let i = 0; !(await lastVisible()); i++) {
      assert.ok(i < 100, 'the wheel scrolls the card\'s diff to its end');
      await page.mouse.wheel(0, 200);
    }
    assert.equal(plain(await card.locator('.diff-line:last-child .diff-text').textContent()), '+ROWS.append(120)  # row 120');
    await shot('code-server-inline-card.png');

    // Open diff: the diff editor opens and nothing blocks it; the request stays pending
    await card.locator('button.permission-open-diff').click();
    const diffEditor = page.locator('.monaco-diff-editor').first();
    await diffEditor.waitFor({ timeout: 30000 });
    const diffTab = page.locator('.tab', { hasText: 'proposed by ToyCoder' });
    await diffTab.first().waitFor({ timeout: 30000 });
    // not the deleted-lines zone an inline (narrow) diff editor adds inside the modified side
    const modified = diffEditor.locator('.editor.modified .view-lines:not(.line-delete)');
    await modified.waitFor({ timeout: 30000 });
    assert.ok(!plain(await modified.textContent()).includes('ROWS.append(120)'), 'the end is not on the first screen');
    await modified.click();
    await page.keyboard.press('Control+End');
    for (let i = 0; !plain(await modified.textContent()).includes('ROWS.append(120)  # row 120'); i++) {
      assert.ok(i < 100, 'the diff editor scrolls to its last line');
      await page.waitForTimeout(100);
    }
    await shot('code-server-diff-pending.png');
    assert.equal(await page.locator('.monaco-dialog-box').count(), 0, 'still no modal');
    assert.equal(await card.getAttribute('data-state'), 'pending');
    assert.equal(existsSync(join(ws.root, 'src', 'table.py')), false, 'nothing written while pending');

    // the chat hidden (it lives in the secondary side bar): a status-bar item says a request waits,
    // and brings the card back
    await runCommand(page, 'View: Toggle Secondary Side Bar Visibility');
    const waiting = page.locator('.statusbar-item', { hasText: 'ToyCoder: review 1 request' });
    await waiting.waitFor({ timeout: 30000 });
    await shot('code-server-status-item.png');
    await waiting.click();
    const shown = await chatFrame(page);
    await shown.locator('.permission-card').waitFor({ state: 'visible', timeout: 30000 });
    await waiting.waitFor({ state: 'hidden', timeout: 30000 });

    // Accept in the diff editor's title bar: the file is written, the diff tab closes, the card is a record
    const accept = page.locator('.editor-actions [aria-label*="Accept"]').first();
    await accept.waitFor({ timeout: 30000 });
    await accept.click();
    await diffTab.first().waitFor({ state: 'detached', timeout: 30000 });
    const record = shown.locator('.permission-record');
    await record.waitFor({ timeout: 30000 });
    assert.equal(plain(await record.textContent()), '\u2713Allowed once (in the diff editor): write_file src/table.py');

    // the streamed answer and the written file
    await shown.waitForSelector('.assistant .markdown strong', { timeout: 60000 });
    await shown.waitForSelector('#stop', { state: 'hidden', timeout: 60000 });
    assert.equal(await shown.textContent('.assistant .markdown strong'), 'src/table.py has 120 rows');
    assert.equal(await shown.getAttribute('.tool-card', 'data-status'), 'completed');
    assert.equal(readFileSync(join(ws.root, 'src', 'table.py'), 'utf8'), TABLE);
    assert.match((await shown.textContent('.turn-footer'))!, /in · \d+ out tokens/);
    await shot('code-server-chat.png');

    // Undo on the turn's changes card (the same webview frame): the file the turn created is gone
    const changes = shown.locator('.changes-card').first();
    await changes.waitFor({ timeout: 30000 });
    assert.match(plain(await changes.locator('.changes-summary').textContent()), /^1 file changed \+120 \u22120$/);
    await changes.locator('.changes-undo').click();
    await shown.locator('.changes-card[data-state="restored"]').first().waitFor({ timeout: 30000 });
    await waitFor(() => !existsSync(join(ws.root, 'src', 'table.py')), 'Undo to remove src/table.py', 30000);
    await shot('code-server-undo.png');

    // src/app.py open with unsaved work: the agent's edit goes into that buffer (workspace/applyEdit),
    // which stays unsaved, the disk untouched; Ctrl+Z in the editor takes the agent's edit back
    const appPath = join(ws.root, 'src', 'app.py');
    const onDisk = readFileSync(appPath, 'utf8');
    await openFile(page, 'src/app.py');
    const editorLines = page.locator('.editor-group-container.active .monaco-editor .view-lines').first();
    await editorLines.click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('# mine');
    await page.locator('.tab.active.dirty', { hasText: 'app.py' }).waitFor({ timeout: 15000 });
    await shown.fill('#prompt', 'Swap the operands in add()');
    await shown.press('#prompt', 'Enter');
    const editCard = shown.locator('.permission-card');
    await editCard.waitFor({ timeout: 60000 });
    await editCard.locator('button.permission-allow').click();
    await shown.locator('.assistant .markdown', { hasText: 'Swapped the operands.' }).waitFor({ timeout: 60000 });
    const bufferShows = async (expected: RegExp, what: string) => {
      for (let i = 0; !expected.test(plain(await editorLines.textContent())); i++) {
        assert.ok(i < 100, `${what}: ${plain(await editorLines.textContent())}`);
        await page.waitForTimeout(100);
      }
    };
    await bufferShows(/return b \+ a.*# mine/, 'the edit is in the buffer, on top of the unsaved work');
    assert.equal(await page.locator('.tab.active.dirty', { hasText: 'app.py' }).count(), 1, 'the buffer stays unsaved');
    assert.equal(readFileSync(appPath, 'utf8'), onDisk, 'the file on disk is untouched');
    await shot('code-server-apply-edit.png');
    await editorLines.click();
    await page.keyboard.press('Control+z');
    await bufferShows(/return a \+ b.*# mine/, 'Ctrl+Z undoes the agent\'s edit and keeps the user\'s');
    assert.deepEqual(llm.violations(), []);
  } catch (e) {
    await shot('code-server-failure.png');
    process.stdout.write(`# code-server log:\n${cs.log().split('\n').slice(-40).map((l) => `# ${l}`).join('\n')}\n`);
    throw e;
  }
});
