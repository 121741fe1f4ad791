/**
 * Answers toycoder/diagnostics (issue 29): the editor's diagnostics of the files asked about, after
 * waiting up to `waitMs` for VS Code to report them again (onDidChangeDiagnostics, after an edit),
 * as LSP `Diagnostic`s. Thin: VS Code's language servers do the work, this only converts.
 */
import * as vscode from 'vscode';
import type { DiagnosticsParams, DiagnosticsResult } from './shared/protocol';

type LspDiagnostic = Record<string, unknown>;

function toLsp(d: vscode.Diagnostic): LspDiagnostic {
  const code = typeof d.code === 'object' && d.code !== null ? d.code.value : d.code;
  return {
    range: {
      start: { line: d.range.start.line, character: d.range.start.character },
      end: { line: d.range.end.line, character: d.range.end.character },
    },
    severity: d.severity + 1, // vscode: Error 0 .. Hint 3; LSP: Error 1 .. Hint 4
    message: d.message,
    ...(d.source ? { source: d.source } : {}),
    ...(code !== undefined ? { code } : {}),
  };
}

/** Resolves when VS Code reports new diagnostics for one of `uris`, after `ms`, or on cancel. */
function changed(uris: vscode.Uri[], ms: number, token: vscode.CancellationToken): Promise<void> {
  const keys = new Set(uris.map((u) => u.toString()));
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      sub.dispose();
      cancel.dispose();
      resolve();
    };
    const timer = setTimeout(done, ms);
    const sub = vscode.languages.onDidChangeDiagnostics((e) => {
      if (e.uris.some((u) => keys.has(u.toString()))) done();
    });
    const cancel = token.onCancellationRequested(done);
  });
}

export async function editorDiagnostics(params: DiagnosticsParams, token: vscode.CancellationToken): Promise<DiagnosticsResult> {
  const uris = params.uris.map((u) => vscode.Uri.parse(u));
  if (params.waitMs > 0 && uris.length) await changed(uris, params.waitMs, token);
  const pairs: Array<[vscode.Uri, readonly vscode.Diagnostic[]]> = uris.length
    ? uris.map((u) => [u, vscode.languages.getDiagnostics(u)])
    : vscode.languages.getDiagnostics();
  return { items: pairs.map(([u, ds]) => ({ uri: u.toString(), diagnostics: ds.map(toLsp) })) };
}
