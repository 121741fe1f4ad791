/**
 * The "ToyCoder" webview view: hosts the chat webview and carries the message envelope; tells
 * whether it is visible and carries the badge (PendingAttention sets both).
 */

import * as vscode from 'vscode';
import type { ChatSurface } from './controller';
import { isToHost, ToHost, ToWebview } from './shared/messages';
import { chatHtml } from './webviewHtml';

export const VIEW_ID = 'toycoder.chat';

export class ChatViewProvider implements vscode.WebviewViewProvider, ChatSurface {
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private readyWaiters: Array<() => void> = [];
  private badge: vscode.ViewBadge | undefined;
  private description = '';
  private readonly visibility = new vscode.EventEmitter<void>();
  /** Shown, hidden, created or disposed. */
  readonly onDidChangeVisibility = this.visibility.event;
  onMessage: (message: ToHost) => void = () => undefined;

  constructor(private readonly extensionUri: vscode.Uri) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    const webview = view.webview;
    webview.options = {
      enableScripts: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, 'out'), vscode.Uri.joinPath(this.extensionUri, 'media')],
    };
    webview.html = chatHtml({
      cspSource: webview.cspSource,
      scriptUri: webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'out', 'webview.js')).toString(),
      styleUri: webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, 'media', 'chat.css')).toString(),
    });
    webview.onDidReceiveMessage((message: unknown) => {
      if (!isToHost(message)) return;
      if (message.type === 'ready') {
        this.ready = true;
        for (const w of this.readyWaiters.splice(0)) w();
      }
      this.onMessage(message);
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.ready = false;
        this.visibility.fire();
      }
    });
    view.badge = this.badge;
    view.description = this.description;
    view.onDidChangeVisibility(() => this.visibility.fire());
    this.visibility.fire();
  }

  get visible(): boolean {
    return this.view?.visible ?? false;
  }

  /** Kept for a view resolved later. */
  setBadge(badge: vscode.ViewBadge | undefined): void {
    this.badge = badge;
    if (this.view) this.view.badge = badge;
  }

  /** The session's title and mode, next to the view's name; kept for a view resolved later. */
  setDescription(text: string): void {
    this.description = text;
    if (this.view) this.view.description = text;
  }

  /** Messages sent while no webview listens are dropped: a new webview asks for the state on `ready`. */
  post(message: ToWebview): void {
    if (this.view && this.ready) void this.view.webview.postMessage(message);
  }

  async reveal(): Promise<void> {
    if (this.view && this.ready) {
      this.view.show(true);
      return;
    }
    const ready = new Promise<void>((resolve) => {
      this.readyWaiters.push(resolve);
      setTimeout(resolve, 10000); // do not hang a command on a view that never loads
    });
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
    await ready;
  }

  async hide(): Promise<void> {
    await vscode.commands.executeCommand('workbench.action.closePanel');
  }
}
