import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { applyWorkspaceEdit } from '../../src/applyEdit';
import { clientCapabilities } from '../../src/daemon';
import type { ApplyWorkspaceEditParams } from '../../src/shared/lsp';
import { calls, resetStub, StubDocument, Uri } from '../../stubs/vscode';

const URI = 'file:///ws/calc.py';
const TEXT = 'def average(numbers):\n    return sum(numbers) / (len(numbers) - 1)\n';

/** What the daemon sends (lsp_mapping.workspace_edit): one TextEdit over the part that differs. */
const FIX: ApplyWorkspaceEditParams = {
  label: 'ToyCoder: edit calc.py',
  edit: { changes: { [URI]: [{ range: { start: { line: 1, character: 26 }, end: { line: 1, character: 44 } },
    newText: 'len(numbers)' }] } },
};
const FIXED = 'def average(numbers):\n    return sum(numbers) / len(numbers)\n';

function open(text = TEXT, dirty = false): StubDocument {
  const doc = new StubDocument(Uri.parse(URI), text, 'python');
  doc.isDirty = dirty;
  (vscode.workspace as any).textDocuments.push(doc);
  return doc;
}

const applyCalls = () => calls.filter(([name]) => name === 'workspace.applyEdit').length;
const warnings = () => calls.filter(([name]) => name === 'window.showWarningMessage').map(([, args]) => String(args[0]));

beforeEach(() => resetStub());

test('a clean document gets the edit and is saved, so disk and buffer agree', async () => {
  const doc = open();
  assert.deepEqual(await applyWorkspaceEdit(FIX), { applied: true });
  assert.equal(doc.getText(), FIXED);
  assert.equal(doc.saves, 1);
  assert.equal(doc.isDirty, false);
});

test('a dirty document gets the edit on top of its unsaved work and stays unsaved', async () => {
  const unsaved = `${TEXT}# not saved yet\n`;
  const doc = open(unsaved, true);
  assert.deepEqual(await applyWorkspaceEdit(FIX), { applied: true });
  assert.equal(doc.getText(), `${FIXED}# not saved yet\n`);
  assert.equal(doc.saves, 0, 'unsaved work is never saved for the user');
  assert.equal(doc.isDirty, true);
});

test('VS Code refusing the edit is answered applied: false with a reason; nothing is saved', async () => {
  const doc = open();
  (vscode.workspace as any).applyEdit = async () => false;
  assert.deepEqual(await applyWorkspaceEdit(FIX), { applied: false, failureReason: 'VS Code did not apply the edit' });
  (vscode.workspace as any).applyEdit = async () => { throw new Error('read-only file system'); };
  assert.deepEqual(await applyWorkspaceEdit(FIX),
    { applied: false, failureReason: 'VS Code could not apply the edit: read-only file system' });
  assert.equal(doc.getText(), TEXT);
  assert.equal(doc.saves, 0);
});

test('a range the buffer does not have (it changed since) is refused, not clamped', async () => {
  const doc = open('def average(numbers):\n');
  const result = await applyWorkspaceEdit(FIX);
  assert.equal(result.applied, false);
  assert.match(result.failureReason ?? '', /calc\.py changed in the editor/);
  assert.equal(applyCalls(), 0);
  assert.equal(doc.getText(), 'def average(numbers):\n');
});

test('documentChanges: a stale version and file operations are refused; a matching version applies', async () => {
  const doc = open();
  doc.version = 7;
  const [edit] = FIX.edit.changes![URI];
  const stale = await applyWorkspaceEdit({ edit: { documentChanges: [{ textDocument: { uri: URI, version: 6 }, edits: [edit] }] } });
  assert.equal(stale.applied, false);
  assert.match(stale.failureReason ?? '', /changed in the editor/);
  const rename = await applyWorkspaceEdit({ edit: { documentChanges: [{ kind: 'rename' }] } });
  assert.deepEqual(rename, { applied: false, failureReason: 'file operations (rename) are not supported' });
  assert.equal(doc.getText(), TEXT);
  assert.deepEqual(await applyWorkspaceEdit({ edit: { documentChanges: [{ textDocument: { uri: URI, version: 7 }, edits: [edit] }] } }),
    { applied: true });
  assert.equal(doc.getText(), FIXED);
});

test('initialize declares applyEdit with documentChanges (versioned edits) only when edits are applied here', () => {
  assert.deepEqual(clientCapabilities(true).workspace, { applyEdit: true, workspaceEdit: { documentChanges: true } });
  assert.equal(clientCapabilities(false).workspace, undefined);
});

test('malformed requests are refused with a reason', async () => {
  open();
  assert.deepEqual(await applyWorkspaceEdit({} as ApplyWorkspaceEditParams), { applied: false, failureReason: 'no edit' });
  const bad = await applyWorkspaceEdit({ edit: { changes: { [URI]: [{ range: { start: { line: -1, character: 0 } }, newText: 'x' } as any] } } });
  assert.equal(bad.applied, false);
  assert.match(bad.failureReason ?? '', /malformed text edit/);
  assert.equal(applyCalls(), 0);
});

test('a failed save leaves the edit applied and warns the user', async () => {
  const doc = open();
  doc.saveResult = () => { throw new Error('disk full'); };
  const lines: string[] = [];
  assert.deepEqual(await applyWorkspaceEdit(FIX, (l) => lines.push(l)), { applied: true });
  assert.equal(doc.getText(), FIXED);
  assert.equal(doc.isDirty, true);
  assert.match(warnings()[0] ?? '', /edit is in .*calc\.py but saving it failed: disk full/);
  assert.equal(lines.length, 1);
});
