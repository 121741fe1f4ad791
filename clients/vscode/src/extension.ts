/** ToyCoder for VS Code: activation, commands, settings, and the wiring of the inline review. */

import * as vscode from 'vscode';
import { PendingAttention } from './attention';
import { ChatViewProvider, VIEW_ID } from './chatView';
import { ChatController } from './controller';
import { DaemonClient } from './daemon';
import { closeProposalTabs, PROPOSAL_SCHEME, ProposalProvider, proposalUriFor, showDiffText, showProposedDiff } from './diffView';
import { Reviews } from './reviews';

let controller: ChatController | undefined;

export function workspaceRoot(): vscode.Uri | undefined {
  return vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file')?.uri;
}

/** The daemon command from the settings: an array, or (leniently) a string split on spaces. */
export function daemonCommand(config: vscode.WorkspaceConfiguration): string[] {
  const value = config.get<unknown>('daemon.command');
  if (Array.isArray(value) && value.length && value.every((v) => typeof v === 'string')) return value as string[];
  if (typeof value === 'string' && value.trim()) return value.trim().split(/\s+/);
  return ['toycoder-daemon'];
}

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('ToyCoder');
  const proposals = new ProposalProvider();
  const view = new ChatViewProvider(context.extensionUri);
  const root = workspaceRoot();
  const version = (context.extension?.packageJSON as { version?: string } | undefined)?.version ?? '0';
  const attention = new PendingAttention(view, 'toycoder.showPendingReview');
  const reviews = new Reviews({
    post: (message) => view.post(message),
    log: (line) => output.appendLine(line),
    openDiff: async (preview) => {
      try {
        return (await showProposedDiff(proposals, root, preview)).uris.map((u) => u.toString());
      } catch (e) {
        void vscode.window.showErrorMessage(`ToyCoder: cannot show the diff: ${(e as Error).message}`);
        return [];
      }
    },
    closeTabs: async (uris) => {
      await closeProposalTabs(uris);
      for (const u of uris) proposals.forget(vscode.Uri.parse(u));
    },
    pendingChanged: (pending) => attention.update(pending.map((p) => p.params.title)),
  });

  controller = new ChatController({
    root,
    reviews,
    surface: view,
    log: (line) => output.appendLine(line),
    showDiff: async (preview) => {
      await showProposedDiff(proposals, root, preview);
    },
    showText: async (name, text) => {
      await showDiffText(proposals, name, text);
    },
    startDaemon: (handlers) => {
      const config = vscode.workspace.getConfiguration('toycoder');
      const command = daemonCommand(config);
      output.appendLine(`[toycoder-vscode] starting ${JSON.stringify(command)} in ${root?.fsPath ?? '(no folder)'}`);
      return DaemonClient.start({
        command,
        root: root?.fsPath,
        configPath: config.get<string>('configPath') || undefined,
        logLevel: config.get<string>('logLevel') || undefined,
        clientName: 'toycoder-vscode',
        clientVersion: version,
      }, handlers);
    },
  });
  const chat = controller;
  view.onMessage = (message) => {
    chat.handle(message).catch((e: Error) => output.appendLine(`[toycoder-vscode] ${e.message}`));
  };

  /** Accept / Reject in a proposal's title bar (the editor's resource is the argument). */
  const decideProposal = (decision: 'allow_once' | 'reject') => async (resource?: unknown) => {
    const uri = proposalUriFor(resource);
    if (!uri || !reviews.decideByUri(uri, decision)) {
      void vscode.window.showInformationMessage('ToyCoder: this proposal is no longer pending.');
    }
  };

  const run = (fn: () => Promise<void>) => async () => {
    try {
      await fn();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      output.appendLine(`[toycoder-vscode] ${message}`);
      void vscode.window.showErrorMessage(`ToyCoder: ${message}`);
    }
  };

  context.subscriptions.push(
    output,
    proposals,
    attention,
    vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, proposals),
    vscode.window.registerWebviewViewProvider(VIEW_ID, view, { webviewOptions: { retainContextWhenHidden: true } }),
    vscode.commands.registerCommand('toycoder.openChat', run(async () => {
      await view.reveal();
      view.post({ type: 'focusInput' });
    })),
    // VS Code's own "move view" picker (secondary side bar, primary side bar, panel), for the focused view
    vscode.commands.registerCommand('toycoder.moveView', run(async () => {
      await vscode.commands.executeCommand(`${VIEW_ID}.focus`); // the picker moves the view that has focus
      await vscode.commands.executeCommand('workbench.action.moveFocusedView');
    })),
    vscode.commands.registerCommand('toycoder.newSession', run(async () => {
      await view.reveal();
      await chat.newSession();
    })),
    vscode.commands.registerCommand('toycoder.switchSession', run(async () => {
      await chat.switchSession();
      await view.reveal();
    })),
    vscode.commands.registerCommand('toycoder.cancel', run(() => chat.cancel())),
    vscode.commands.registerCommand('toycoder.setMode', run(() => chat.pickMode())),
    vscode.commands.registerCommand('toycoder.acceptProposal', decideProposal('allow_once')),
    vscode.commands.registerCommand('toycoder.rejectProposal', decideProposal('reject')),
    vscode.commands.registerCommand('toycoder.showPendingReview', run(async () => {
      await view.reveal();
      const [first] = reviews.pendingReviews;
      if (first) view.post({ type: 'showPermission', id: first.id });
    })),
    vscode.commands.registerCommand('toycoder.askAboutSelection',
      run(() => chat.askAboutSelection(vscode.window.activeTextEditor))),
    vscode.commands.registerCommand('toycoder.addSelection',
      run(() => chat.addSelection(vscode.window.activeTextEditor))),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('toycoder')) {
        output.appendLine('[toycoder-vscode] settings changed: they apply when the daemon restarts');
      }
    }),
    { dispose: () => void chat.dispose() },
  );
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
