/**
 * A pending permission request must not go unseen: while the chat view is hidden, a badge on the
 * view and a status-bar item (which reveals the chat) say that ToyCoder waits. The context key
 * `toycoder.reviewPending` enables Accept / Reject in a proposal's title bar.
 */

import * as vscode from 'vscode';

export const REVIEW_PENDING_KEY = 'toycoder.reviewPending';

/** The part of the chat view this needs (ChatViewProvider, or a fake in tests). */
export interface AttentionView {
  readonly visible: boolean;
  onDidChangeVisibility(listener: () => unknown): { dispose(): unknown };
  setBadge(badge: vscode.ViewBadge | undefined): void;
}

export class PendingAttention implements vscode.Disposable {
  private titles: string[] = [];
  private readonly item: vscode.StatusBarItem;
  private readonly subscription: { dispose(): unknown };

  /** `command` reveals the chat at the pending card. */
  constructor(private readonly view: AttentionView, command: string) {
    this.item = vscode.window.createStatusBarItem('toycoder.pendingReview', vscode.StatusBarAlignment.Left, 100);
    this.item.name = 'ToyCoder: permission request';
    this.item.command = command;
    this.subscription = view.onDidChangeVisibility(() => this.render());
  }

  /** The titles of the pending requests (empty: none). */
  update(titles: string[]): void {
    const had = this.titles.length > 0;
    this.titles = titles;
    if (had !== titles.length > 0) void vscode.commands.executeCommand('setContext', REVIEW_PENDING_KEY, titles.length > 0);
    this.render();
  }

  private render(): void {
    const n = this.titles.length;
    if (n === 0 || this.view.visible) {
      this.view.setBadge(undefined);
      this.item.hide();
      return;
    }
    const what = n === 1 ? 'a permission request waits' : `${n} permission requests wait`;
    this.view.setBadge({ value: n, tooltip: `ToyCoder: ${what}` });
    this.item.text = `$(shield) ToyCoder: ${n === 1 ? 'review 1 request' : `review ${n} requests`}`;
    this.item.tooltip = `ToyCoder wants to run:\n${this.titles.join('\n')}\n\nClick to review it in the chat.`;
    this.item.show();
  }

  dispose(): void {
    this.subscription.dispose();
    this.item.dispose();
  }
}
