/**
 * "Show diff" for a permission request: VS Code's diff editor with the current file (the editor's
 * text, unsaved changes included) on the left and the proposed content on the right. The proposed
 * content lives in a virtual document; it is the preview's unified diff applied to the current
 * text. If the diff does not apply, the diff text itself is shown.
 */

import * as vscode from 'vscode';
import { applyUnifiedDiff, diffIsNewFile } from './unifiedDiff';

export const PROPOSAL_SCHEME = 'toycoder-proposal';

export class ProposalProvider implements vscode.TextDocumentContentProvider {
  private readonly contents = new Map<string, string>();
  private next = 1;
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  /** A virtual document with this text; `name` gives it a path (and so a language). */
  add(name: string, text: string): vscode.Uri {
    const id = String(this.next++);
    this.contents.set(id, text);
    if (this.contents.size > 50) this.contents.delete(this.contents.keys().next().value!);
    return vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: `/${name.replace(/^\/+/, '')}`, query: id });
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.query) ?? '';
  }

  dispose(): void {
    this.changed.dispose();
  }
}

async function currentText(uri: vscode.Uri): Promise<string | undefined> {
  const open = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (open) return open.getText();
  try {
    return (await vscode.workspace.openTextDocument(uri)).getText();
  } catch {
    return undefined; // does not exist (yet)
  }
}

export async function showProposedDiff(
  provider: ProposalProvider, root: vscode.Uri | undefined, preview: { path: string; diff: string },
): Promise<'diff' | 'text'> {
  const fileUri = /^([a-zA-Z]:)?[\\/]/.test(preview.path) || !root
    ? vscode.Uri.file(preview.path)
    : vscode.Uri.joinPath(root, preview.path);
  const isNew = diffIsNewFile(preview.diff);
  const before = isNew ? '' : await currentText(fileUri);
  const proposed = before === undefined ? undefined : applyUnifiedDiff(before, preview.diff);
  if (proposed === undefined) {
    const doc = await vscode.workspace.openTextDocument(provider.add(`${preview.path}.diff`, preview.diff));
    await vscode.window.showTextDocument(doc, { preview: true });
    return 'text';
  }
  const left = isNew ? provider.add(`${preview.path} (new file)`, '') : fileUri;
  const right = provider.add(preview.path, proposed);
  await vscode.commands.executeCommand('vscode.diff', left, right, `${preview.path} ↔ proposed by ToyCoder`,
    { preview: true });
  return 'diff';
}
