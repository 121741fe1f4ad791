/**
 * The Copy and Insert buttons of rendered code blocks (markdown.ts draws them): one delegated
 * listener, since blocks are re-rendered while text streams. The host does the work, with
 * `vscode.env.clipboard` and the active editor, which a webview cannot reach reliably.
 */

import type { ToHost } from '../shared/messages';

const FEEDBACK_MS = 1500;

export function attachCodeActions(root: HTMLElement, post: (message: ToHost) => void): void {
  root.addEventListener('click', (e) => {
    const button = (e.target as HTMLElement | null)?.closest?.('button.code-copy, button.code-insert');
    if (!(button instanceof HTMLButtonElement)) return;
    const code = button.closest('.code-block')?.querySelector('pre code');
    if (!code) return;
    const text = code.textContent ?? '';
    const copy = button.classList.contains('code-copy');
    post(copy ? { type: 'copyCode', text } : { type: 'insertCode', text });
    const label = copy ? 'Copy' : 'Insert';
    button.textContent = copy ? 'Copied' : 'Inserted';
    setTimeout(() => { button.textContent = label; }, FEEDBACK_MS);
  });
}
