/** The webview's entry point: connect the chat view to the host through the VS Code webview API. */

import type { Envelope, ToHost, ToWebview } from '../shared/messages';
import { ChatView } from './chat';

interface VsCodeApi {
  postMessage(message: Envelope): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const chat = new ChatView((message: ToHost) => vscode.postMessage(message));

window.addEventListener('message', (event: MessageEvent<ToWebview>) => {
  const message = event.data;
  if (message && typeof message === 'object' && typeof message.type === 'string') chat.handle(message);
});

vscode.postMessage({ type: 'ready' });
