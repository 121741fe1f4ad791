/**
 * "Show diff" for a permission request: VS Code's diff editor with the current file (the editor's
 * text, unsaved changes included) on the left and the proposed content on the right. The proposed
 * content lives in a virtual document; it is the preview's unified diff applied to the current
 * text. If the diff does not apply, the diff text itself is shown. The tabs it opens are closed
 * when the request is decided (closeProposalTabs), so a stale proposal never looks pending.
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

  /** Drop a proposal's text (its request was decided). */
  forget(uri: vscode.Uri): void {
    if (uri.scheme === PROPOSAL_SCHEME) this.contents.delete(uri.query);
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

/** `text` in a read-only virtual document named `name` (a `.diff` name: shown as a diff); its URI. */
export async function showDiffText(provider: ProposalProvider, name: string, text: string): Promise<vscode.Uri> {
  const uri = provider.add(name, text);
  const doc = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(doc, { preview: true });
  return uri;
}

export interface ShownProposal {
  /** `diff`: the diff editor; `text`: the diff text (it did not apply to the current file). */
  shown: 'diff' | 'text';
  /** The virtual documents it opened (the proposal's tabs). */
  uris: vscode.Uri[];
}

export async function showProposedDiff(
  provider: ProposalProvider, root: vscode.Uri | undefined, preview: { path: string; diff: string },
): Promise<ShownProposal> {
  const fileUri = /^([a-zA-Z]:)?[\\/]/.test(preview.path) || !root
    ? vscode.Uri.file(preview.path)
    : vscode.Uri.joinPath(root, preview.path);
  const isNew = diffIsNewFile(preview.diff);
  const before = isNew ? '' : await currentText(fileUri);
  const proposed = before === undefined ? undefined : applyUnifiedDiff(before, preview.diff);
  if (proposed === undefined) return { shown: 'text', uris: [await showDiffText(provider, `${preview.path}.diff`, preview.diff)] };
  const left = isNew ? provider.add(`${preview.path} (new file)`, '') : fileUri;
  const right = provider.add(preview.path, proposed);
  await vscode.commands.executeCommand('vscode.diff', left, right, `${preview.path} ↔ proposed by ToyCoder`,
    { preview: true });
  return { shown: 'diff', uris: isNew ? [left, right] : [right] };
}

/** The URIs a tab shows (both sides of a diff). */
function tabUris(tab: vscode.Tab): string[] {
  const input = tab.input;
  if (input instanceof vscode.TabInputTextDiff) return [input.original.toString(), input.modified.toString()];
  if (input instanceof vscode.TabInputText) return [input.uri.toString()];
  return [];
}

/** Close every tab that shows one of these proposal documents. */
export async function closeProposalTabs(uris: readonly string[]): Promise<void> {
  if (uris.length === 0) return;
  const wanted = new Set(uris);
  const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs)
    .filter((t) => tabUris(t).some((u) => wanted.has(u)));
  if (tabs.length) await vscode.window.tabGroups.close(tabs, true);
}

/**
 * The proposal an editor/title command is about: VS Code passes the editor's resource (for a diff
 * editor, its right side); from the palette there is none, so the active tab decides.
 */
export function proposalUriFor(arg: unknown): string | undefined {
  if (arg instanceof vscode.Uri && arg.scheme === PROPOSAL_SCHEME) return arg.toString();
  const tab = vscode.window.tabGroups.activeTabGroup?.activeTab;
  const uris = tab ? tabUris(tab) : [];
  return uris.reverse().find((u) => u.startsWith(`${PROPOSAL_SCHEME}:`));
}
