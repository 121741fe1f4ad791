/**
 * textDocument/didOpen|didChange|didClose (full sync) for the workspace's files, so the daemon's
 * read_file sees unsaved text.
 */

import * as vscode from 'vscode';

export interface DocumentSink {
  didOpen(uri: string, languageId: string, version: number, text: string): void;
  didChange(uri: string, version: number, text: string): void;
  didClose(uri: string): void;
}

export class DocumentSync implements vscode.Disposable {
  private readonly open = new Set<string>();
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(private readonly sink: DocumentSink, private readonly root: vscode.Uri | undefined) {
    this.subscriptions.push(
      vscode.workspace.onDidOpenTextDocument((d) => this.didOpen(d)),
      vscode.workspace.onDidChangeTextDocument((e) => this.didChange(e.document)),
      vscode.workspace.onDidCloseTextDocument((d) => this.didClose(d)),
    );
    for (const d of vscode.workspace.textDocuments) this.didOpen(d);
  }

  /** A file under the workspace root (the daemon ignores the rest anyway). */
  private wanted(doc: vscode.TextDocument): boolean {
    if (doc.uri.scheme !== 'file' || !this.root) return false;
    const root = this.root.fsPath.replace(/[\\/]+$/, '');
    const path = doc.uri.fsPath;
    return path.startsWith(root + '/') || path.startsWith(root + '\\');
  }

  private didOpen(doc: vscode.TextDocument): void {
    if (!this.wanted(doc)) return;
    const uri = doc.uri.toString();
    if (this.open.has(uri)) return;
    this.open.add(uri);
    this.sink.didOpen(uri, doc.languageId, doc.version, doc.getText());
  }

  private didChange(doc: vscode.TextDocument): void {
    const uri = doc.uri.toString();
    if (!this.open.has(uri)) {
      this.didOpen(doc);
      return;
    }
    this.sink.didChange(uri, doc.version, doc.getText());
  }

  private didClose(doc: vscode.TextDocument): void {
    const uri = doc.uri.toString();
    if (!this.open.delete(uri)) return;
    this.sink.didClose(uri);
  }

  dispose(): void {
    for (const s of this.subscriptions.splice(0)) s.dispose();
    this.open.clear();
  }
}
