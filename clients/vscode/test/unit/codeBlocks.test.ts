import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { copyCode, insertCode } from '../../src/codeBlocks';
import { calls, clipboardText, resetStub, window } from '../../stubs/vscode';

beforeEach(() => resetStub());

test('Copy puts the code on the clipboard through VS Code', async () => {
  await copyCode('def f():\n    return 1\n');
  assert.equal(clipboardText.value, 'def f():\n    return 1\n');
});

/** An editor whose text is a string, with VS Code's edit builder over offset selections. */
function fakeEditor(text: string, selections: Array<{ start: number; end: number }>) {
  const editor = {
    text,
    selections,
    document: { uri: 'file:///w/a.py' },
    viewColumn: 1,
    async edit(build: (e: { replace(sel: { start: number; end: number }, t: string): void }) => void) {
      const edits: Array<[{ start: number; end: number }, string]> = [];
      build({ replace: (sel, t) => edits.push([sel, t]) });
      for (const [sel, t] of edits.sort((a, b) => b[0].start - a[0].start)) {
        editor.text = editor.text.slice(0, sel.start) + t + editor.text.slice(sel.end);
      }
      return true;
    },
  };
  return editor;
}

test('Insert replaces the selection of the active editor (each cursor) and shows that editor', async () => {
  const editor = fakeEditor('a = 1\nb = 2\n', [{ start: 0, end: 5 }, { start: 12, end: 12 }]);
  window.activeTextEditor = editor;
  await insertCode('x = 0');
  assert.equal(editor.text, 'x = 0\nb = 2\nx = 0');
  assert.ok(calls.some(([n, a]) => n === 'window.showTextDocument' && a[0] === editor.document));
});

test('Insert with no editor open says so instead of failing', async () => {
  await insertCode('x = 0');
  const info = calls.filter(([n]) => n === 'window.showInformationMessage').map(([, a]) => a[0]);
  assert.deepEqual(info, ['ToyCoder: open a file to insert the code into.']);
});
