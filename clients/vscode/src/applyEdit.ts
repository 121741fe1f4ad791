/**
 * workspace/applyEdit from the daemon: its edit to a file open here goes into the document, so the
 * editor's undo history has it and unsaved work is kept, instead of a disk write behind VS Code's
 * back. A document that had no unsaved changes is saved afterwards (disk and buffer agree); a dirty
 * one stays dirty. The answer says honestly whether the edit landed (docs/protocol.md, "Edits
 * through the editor").
 */

import * as vscode from 'vscode';
import type { ApplyWorkspaceEditParams, ApplyWorkspaceEditResult, LspRange, LspTextEdit, LspWorkspaceEdit } from './shared/lsp';

interface FileEdits {
  uri: vscode.Uri;
  edits: LspTextEdit[];
  /** The document version the edit was made for (documentChanges only); null/undefined: any. */
  version?: number | null;
}

function refuse(failureReason: string): ApplyWorkspaceEditResult {
  return { applied: false, failureReason };
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The edits per file, from either form of a WorkspaceEdit; a string says why it cannot be applied. */
function fileEdits(edit: LspWorkspaceEdit): FileEdits[] | string {
  const out: FileEdits[] = [];
  for (const [uri, edits] of Object.entries(edit.changes ?? {})) {
    if (!Array.isArray(edits)) return `the edits for ${uri} are not a list`;
    out.push({ uri: vscode.Uri.parse(uri), edits });
  }
  for (const change of edit.documentChanges ?? []) {
    // create/rename/delete: the daemon sends none; refuse rather than guess
    if (change.kind) return `file operations (${change.kind}) are not supported`;
    if (!change.textDocument?.uri) return 'a document change without a document';
    out.push({ uri: vscode.Uri.parse(change.textDocument.uri), edits: change.edits ?? [], version: change.textDocument.version });
  }
  return out;
}

function isPosition(p: unknown): p is { line: number; character: number } {
  const q = p as { line?: unknown; character?: unknown } | undefined;
  return Number.isInteger(q?.line) && Number.isInteger(q?.character) && (q!.line as number) >= 0 && (q!.character as number) >= 0;
}

function toRange(r: LspRange): vscode.Range | undefined {
  if (!isPosition(r?.start) || !isPosition(r?.end)) return undefined;
  return new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
}

function openDocument(uri: vscode.Uri): vscode.TextDocument | undefined {
  const key = uri.toString();
  return vscode.workspace.textDocuments.find((d) => d.uri.toString() === key);
}

function label(uri: vscode.Uri): string {
  return vscode.workspace.asRelativePath(uri, false);
}

/** The request handler: apply, save what was clean, answer ApplyWorkspaceEditResult. */
export async function applyWorkspaceEdit(params: ApplyWorkspaceEditParams,
  log: (line: string) => void = () => undefined): Promise<ApplyWorkspaceEditResult> {
  const edit = params?.edit;
  if (!edit || typeof edit !== 'object') return refuse('no edit');
  const files = fileEdits(edit);
  if (typeof files === 'string') return refuse(files);

  const workspaceEdit = new vscode.WorkspaceEdit();
  const wasDirty = new Map<string, boolean>();
  for (const file of files) {
    const doc = openDocument(file.uri);
    if (doc && file.version != null && doc.version !== file.version) {
      return refuse(`${label(file.uri)} changed in the editor; the edit was not applied`);
    }
    wasDirty.set(file.uri.toString(), doc?.isDirty ?? false);
    for (const e of file.edits) {
      const range = toRange(e?.range);
      if (!range || typeof e.newText !== 'string') return refuse(`a malformed text edit for ${label(file.uri)}`);
      // VS Code would clamp a range past the end; such a range means the buffer is not what the daemon saw
      if (doc && !doc.validateRange(range).isEqual(range)) {
        return refuse(`${label(file.uri)} changed in the editor; the edit was not applied`);
      }
      workspaceEdit.replace(file.uri, range, e.newText);
    }
  }

  let applied: boolean;
  try {
    applied = await vscode.workspace.applyEdit(workspaceEdit);
  } catch (e) {
    return refuse(`VS Code could not apply the edit: ${errorMessage(e)}`);
  }
  if (!applied) return refuse('VS Code did not apply the edit');

  for (const file of files) {
    if (wasDirty.get(file.uri.toString())) continue; // unsaved work stays unsaved, with the edit on top
    const doc = openDocument(file.uri);
    if (!doc?.isDirty) continue;
    // the edit is in the buffer either way: a failed save is reported to the user, not as "not applied"
    let why = '';
    try {
      if (!(await doc.save())) why = 'VS Code did not save it';
    } catch (e) {
      why = errorMessage(e);
    }
    if (why) {
      const message = `the agent's edit is in ${label(file.uri)} but saving it failed: ${why}`;
      log(`[toycoder-vscode] ${message}`);
      void vscode.window.showWarningMessage(`ToyCoder: ${message}`);
    }
  }
  return { applied: true };
}
