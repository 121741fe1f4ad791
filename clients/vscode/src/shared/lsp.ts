/**
 * The standard LSP shapes the extension reads (not part of the ToyCoder contract, so not generated).
 */

/** `$/progress` values (LSP work-done progress). */
export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; cancellable?: boolean }
  | { kind: 'report'; message?: string }
  | { kind: 'end'; message?: string };

/** LSP positions count UTF-16 code units, as VS Code's do. */
export interface LspPosition { line: number; character: number }
export interface LspRange { start: LspPosition; end: LspPosition }
export interface LspTextEdit { range: LspRange; newText: string }

/** A WorkspaceEdit in either form; the daemon sends one TextEdit per file, as `documentChanges` with the
 * document version when the client declared `workspaceEdit.documentChanges`, else as `changes`. */
export interface LspWorkspaceEdit {
  changes?: Record<string, LspTextEdit[]>;
  documentChanges?: Array<{ textDocument?: { uri: string; version?: number | null }; edits?: LspTextEdit[]; kind?: string }>;
}

/** workspace/applyEdit (server -> client). */
export interface ApplyWorkspaceEditParams { label?: string; edit: LspWorkspaceEdit }
export interface ApplyWorkspaceEditResult { applied: boolean; failureReason?: string }
