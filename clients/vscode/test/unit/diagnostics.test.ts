/** toycoder/diagnostics answered from VS Code's diagnostics (src/diagnostics.ts), on the stub. */
import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import type * as vscode from 'vscode';
import { clientCapabilities } from '../../src/daemon';
import { editorDiagnostics } from '../../src/diagnostics';
import { CancellationTokenSource, diagnostics, diagnosticsChanged, DiagnosticSeverity, Range, resetStub, Uri } from '../../stubs/vscode';

const token = () => new CancellationTokenSource().token as unknown as vscode.CancellationToken;
const uri = 'file:///ws/calc.py';
const undefinedY = { range: new Range(2, 4, 2, 5), severity: DiagnosticSeverity.Error, message: "undefined name 'y'", source: 'pyflakes' };
const lsp = {
  range: { start: { line: 2, character: 4 }, end: { line: 2, character: 5 } }, severity: 1,
  message: "undefined name 'y'", source: 'pyflakes',
};

beforeEach(() => resetStub());

test('the capability is declared only with a handler', () => {
  assert.equal((clientCapabilities(false, true).experimental as any).toycoder.diagnostics, true);
  assert.equal((clientCapabilities(false).experimental as any).toycoder.diagnostics, undefined);
});

test('answers at once without waitMs, as LSP diagnostics', async () => {
  diagnostics.set(uri, [undefinedY]);
  assert.deepEqual(await editorDiagnostics({ uris: [uri], waitMs: 0 }, token()), { items: [{ uri, diagnostics: [lsp] }] });
  assert.deepEqual(await editorDiagnostics({ uris: [], waitMs: 0 }, token()), { items: [{ uri, diagnostics: [lsp] }] });
});

test('waits for the file to be reported again, up to waitMs', async () => {
  const started = Date.now();
  const answer = editorDiagnostics({ uris: [uri], waitMs: 5000 }, token());
  diagnostics.set(uri, [undefinedY]);
  diagnosticsChanged.fire({ uris: [Uri.parse(uri)] });
  assert.deepEqual(await answer, { items: [{ uri, diagnostics: [lsp] }] });
  assert.ok(Date.now() - started < 4000, 'answered when the change came, not at waitMs');
  const quiet = await editorDiagnostics({ uris: [uri], waitMs: 50 }, token()); // no change: after 50 ms
  assert.deepEqual(quiet, { items: [{ uri, diagnostics: [lsp] }] });
});
