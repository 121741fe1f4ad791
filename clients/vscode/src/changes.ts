/**
 * The host side of a changes card: Undo / Revert / Force become toycoder/checkpoint/restore, a
 * clicked file opens in the editor, and a file's Diff shows toycoder/checkpoint/diff's answer. VS Code
 * reloads an unmodified open document when its file changes on disk; a document with unsaved changes
 * is left as it is, and we say so (UnsavedKept), offering a diff with the disk and never an action
 * that would drop the unsaved text.
 */

import * as vscode from 'vscode';
import type { CheckpointDiff, CheckpointDiffParams, RestoreParams, RestoreResult } from './shared/checkpoints';
import type { RestoreRequest, ToWebview, TurnDiffRequest } from './shared/messages';

/** What a restore needs of the daemon connection. */
export interface CheckpointDaemon {
  restoreCheckpoint(params: RestoreParams): Promise<RestoreResult>;
  /** toycoder/checkpoint/diff: what a turn did to one file. */
  checkpointDiff(params: CheckpointDiffParams): Promise<CheckpointDiff>;
}

/** Show a read-only document named `name` holding `text` (diffView.showDiffText). */
export type ShowText = (name: string, text: string) => Promise<void>;

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * Files changed on disk (a turn's writes, here or in another editor, or a restore) under open documents
 * with unsaved changes: one notice per document state, whose Compare shows the editor's text beside
 * the file on disk (File: Compare Active File with Saved).
 */
export class UnsavedKept {
  private readonly told = new Set<string>();

  constructor(private readonly root: vscode.Uri | undefined) {}

  /** `paths`: absolute, or relative to the workspace root; `lead`: how the notice starts, given the names. */
  notice(paths: string[], lead: (names: string) => string): void {
    const wanted = new Set(paths.map((p) => toUri(p, this.root)?.toString()));
    const docs = vscode.workspace.textDocuments.filter((d) => d.isDirty && wanted.has(d.uri.toString())
      && !this.told.has(`${d.uri.toString()}@${d.version}`));
    if (!docs.length) return;
    for (const d of docs) this.told.add(`${d.uri.toString()}@${d.version}`);
    const names = docs.map((d) => vscode.workspace.asRelativePath(d.uri, false)).join(', ');
    void vscode.window.showInformationMessage(`${lead(names)}; the editor's unsaved changes were kept.`, 'Compare')
      .then(async (choice) => {
        if (choice !== 'Compare') return;
        for (const d of docs) {
          await vscode.window.showTextDocument(d, { preview: false });
          await vscode.commands.executeCommand('workbench.files.action.compareWithSaved', d.uri);
        }
      });
  }
}

/** Restore, and tell the webview how it went (the card shows restored files and conflicts). */
export async function restoreTurn(daemon: CheckpointDaemon, sessionId: string, request: RestoreRequest,
  post: (m: ToWebview) => void, unsaved: UnsavedKept): Promise<void> {
  let result: RestoreResult;
  try {
    result = await daemon.restoreCheckpoint({ sessionId, ...request });
  } catch (e) {
    post({ type: 'restoreFailed', request, message: errorMessage(e) });
    return;
  }
  post({ type: 'restoreResult', request, result });
  // a restore that went into the buffer (inEditor) left the disk alone: nothing to tell
  const inBuffer = new Set(result.inEditor ?? []);
  unsaved.notice((result.restored ?? []).filter((p) => !inBuffer.has(p)), (names) => `ToyCoder restored ${names} on disk`);
}

function toUri(path: string, root: vscode.Uri | undefined): vscode.Uri | undefined {
  if (path.startsWith('/')) return vscode.Uri.file(path);
  return root ? vscode.Uri.joinPath(root, path) : undefined;
}

/** A file of a changes card: open it (a file the turn deleted, or an undo removed, cannot be). */
export async function openChangedFile(uri: string): Promise<void> {
  const target = vscode.Uri.parse(uri);
  if (target.scheme !== 'file') return; // the daemon sends file: URIs; anything else is not ours to open
  try {
    await vscode.window.showTextDocument(target, { preview: true });
  } catch {
    void vscode.window.showInformationMessage(`ToyCoder: ${vscode.workspace.asRelativePath(target, false)} does not exist now.`);
  }
}

/** A file's Diff: the daemon's unified diff of what the turn did to it, read-only (a file that is not
 *  text has none: said so). */
export async function showTurnDiff(daemon: CheckpointDaemon, sessionId: string, request: TurnDiffRequest,
  show: ShowText): Promise<void> {
  let d: CheckpointDiff;
  try {
    d = await daemon.checkpointDiff({ sessionId, ...request });
  } catch (e) {
    void vscode.window.showErrorMessage(`ToyCoder: ${errorMessage(e)}`);
    return;
  }
  if (typeof d.diff !== 'string') {
    void vscode.window.showInformationMessage(`ToyCoder: ${d.path} is not text: no diff to show.`);
    return;
  }
  await show(`${d.path}.diff`, d.diff);
}
