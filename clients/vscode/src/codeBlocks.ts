/**
 * The host side of a code block's Copy and Insert buttons: the clipboard through VS Code's API, and
 * the text at the cursor (replacing the selection) of the editor the person last used.
 */

import * as vscode from 'vscode';

export async function copyCode(text: string): Promise<void> {
  await vscode.env.clipboard.writeText(text);
  vscode.window.setStatusBarMessage('ToyCoder: code copied', 2000);
}

export async function insertCode(text: string): Promise<void> {
  const editor = vscode.window.activeTextEditor ?? vscode.window.visibleTextEditors[0];
  if (!editor) {
    void vscode.window.showInformationMessage('ToyCoder: open a file to insert the code into.');
    return;
  }
  await editor.edit((edit) => {
    for (const selection of editor.selections) edit.replace(selection, text);
  });
  await vscode.window.showTextDocument(editor.document, editor.viewColumn);
}
