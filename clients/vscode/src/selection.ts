/**
 * "Ask About Selection": the question about the selected code and the prompt it becomes (the
 * question, the file, the line range and the code, fenced).
 */

import * as vscode from 'vscode';
import { PROPOSAL_SCHEME } from './diffView';
import type { PromptParams } from './shared/protocol';

/** The prompt for "Ask About Selection": the question, the file, the line range and the code. */
export function selectionPrompt(question: string, path: string, startLine: number, endLine: number,
  languageId: string, text: string): string {
  let fence = '```';
  while (text.includes(fence)) fence += '`';
  const range = startLine === endLine ? `line ${startLine}` : `lines ${startLine}-${endLine}`;
  return `${question.trim() || 'Explain this code.'}\n\nFrom \`${path}\`, ${range}:\n\n${fence}${languageId}\n${text}\n${fence}`;
}

/** The editor's selection and its 1-based lines (a selection ending at a line's start ends on the
 * line before), or undefined with a message: nothing selected, or a proposal's text (not a file yet:
 * its path does not hold that text). */
function selected(editor: vscode.TextEditor | undefined):
    { sel: vscode.Selection; startLine: number; endLine: number; path: string } | undefined {
  if (!editor || editor.selection.isEmpty) {
    void vscode.window.showInformationMessage('ToyCoder: select some code first.');
    return undefined;
  }
  if (editor.document.uri.scheme === PROPOSAL_SCHEME) {
    void vscode.window.showInformationMessage('ToyCoder: this is a proposed change, not a file; decide on it in the chat.');
    return undefined;
  }
  const sel = editor.selection;
  const endLine = sel.end.character === 0 && sel.end.line > sel.start.line ? sel.end.line : sel.end.line + 1;
  return { sel, startLine: sel.start.line + 1, endLine, path: vscode.workspace.asRelativePath(editor.document.uri, false) };
}

/** Ask the question about the selection; the prompt to send, or undefined (nothing selected, dismissed). */
export async function selectionQuestion(editor: vscode.TextEditor | undefined): Promise<string | undefined> {
  const got = selected(editor);
  if (!editor || !got) return undefined;
  const { sel, startLine, endLine, path } = got;
  const text = editor.document.getText(sel);
  const question = await vscode.window.showInputBox({
    title: 'ToyCoder: Ask About Selection',
    prompt: `Your question about ${path}:${startLine}-${endLine}`,
    placeHolder: 'Explain this code.',
  });
  if (question === undefined) return undefined;
  return selectionPrompt(question, path, startLine, endLine, editor.document.languageId, text);
}

/** A context item for the next prompt, with the label of its chip. */
export interface PendingItem {
  label: string;
  item: NonNullable<PromptParams['context']>[number];
}

/** "Add Selection to Chat": the selection as a context item (the daemon reads path and lines from it). */
export function selectionItem(editor: vscode.TextEditor | undefined): PendingItem | undefined {
  const got = selected(editor);
  if (!editor || !got) return undefined;
  const { sel, startLine, endLine, path } = got;
  return {
    label: `${path}:${startLine}-${endLine}`,
    item: {
      type: 'selection', uri: editor.document.uri.toString(), text: editor.document.getText(sel),
      range: { start: { line: sel.start.line, character: sel.start.character },
        end: { line: sel.end.line, character: sel.end.character } },
    },
  };
}
