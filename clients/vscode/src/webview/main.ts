/** The webview's entry point: connect the chat view to the host through the VS Code webview API. */

import type { Envelope, ToHost, ToWebview } from '../shared/messages';
import { ChangesView } from './changesCard';
import { ChatView } from './chat';
import { attachCodeActions } from './codeActions';

interface VsCodeApi {
  postMessage(message: Envelope): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const post = (message: ToHost) => vscode.postMessage(message);
const chat = new ChatView(post);
const changes = new ChangesView(post); // its cards go into the turn chat.ts is showing
attachCodeActions(document.getElementById('conversation')!, post);

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  if (message && typeof message === 'object' && typeof message.type === 'string') {
    chat.handle(message);
    changes.handle(message);
  }
});

vscode.postMessage({ type: 'ready' });
