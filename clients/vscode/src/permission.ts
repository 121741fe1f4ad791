/**
 * Answers to the daemon's questions: toycoder/requestPermission as a native modal (with "Show diff"),
 * toycoder/askUser as a QuickPick or an input box, toycoder/workspace/trust as a modal with Trust /
 * Once / Deny. Dismissing is a "no". When the daemon cancels
 * the request ($/cancelRequest, e.g. the turn was stopped) we stop waiting at once.
 */

import * as vscode from 'vscode';
import type {
  AskUserParams, AskUserResult, Decision, PermissionParams, PermissionResult, WorkspaceTrustParams, WorkspaceTrustResult,
} from './shared/protocol';

export const ALLOW_ONCE = 'Allow once';
export const ALLOW_ALWAYS = 'Always allow';
export const DENY = 'Deny';
export const SHOW_DIFF = 'Show diff';

const DECISIONS: Record<string, Decision> = { [ALLOW_ONCE]: 'allow_once', [ALLOW_ALWAYS]: 'allow_always', [DENY]: 'reject' };

/** Resolves with `fallback` as soon as the token is cancelled. */
function unlessCancelled<T>(promise: Thenable<T>, token: vscode.CancellationToken, fallback: T): Promise<T> {
  if (token.isCancellationRequested) return Promise.resolve(fallback);
  return new Promise<T>((resolve, reject) => {
    const sub = token.onCancellationRequested(() => {
      sub.dispose();
      resolve(fallback);
    });
    promise.then((value) => {
      sub.dispose();
      resolve(value);
    }, (err) => {
      sub.dispose();
      reject(err);
    });
  });
}

export function permissionDetail(params: PermissionParams): string {
  const p = params.preview;
  const lines: string[] = [];
  if (p?.kind === 'command') {
    lines.push(`Command: ${p.command}`);
    if (p.cwd) lines.push(`Directory: ${p.cwd}`);
  } else if (p?.kind === 'diff') {
    let added = 0;
    let removed = 0;
    for (const line of p.diff.split('\n')) {
      if (line.startsWith('+') && !line.startsWith('+++')) added++;
      else if (line.startsWith('-') && !line.startsWith('---')) removed++;
    }
    lines.push(`File: ${p.path} (+${added} −${removed} lines)`);
  }
  lines.push(`Tool: ${params.tool} (${params.level})`);
  return lines.join('\n');
}

export type ShowDiff = (preview: Extract<NonNullable<PermissionParams['preview']>, { kind: 'diff' }>) => Promise<void>;

export async function askPermission(
  params: PermissionParams, token: vscode.CancellationToken, showDiff: ShowDiff,
): Promise<PermissionResult> {
  const reject: PermissionResult = { decision: 'reject' };
  const buttons = params.preview?.kind === 'diff'
    ? [ALLOW_ONCE, ALLOW_ALWAYS, DENY, SHOW_DIFF]
    : [ALLOW_ONCE, ALLOW_ALWAYS, DENY];
  for (;;) {
    const choice = await unlessCancelled(
      vscode.window.showWarningMessage(
        `ToyCoder wants to run ${params.title}`,
        { modal: true, detail: permissionDetail(params) },
        ...buttons,
      ),
      token,
      undefined,
    );
    if (token.isCancellationRequested) return reject;
    if (choice === SHOW_DIFF && params.preview?.kind === 'diff') {
      try {
        await showDiff(params.preview);
      } catch (e) {
        void vscode.window.showErrorMessage(`ToyCoder: cannot show the diff: ${(e as Error).message}`);
      }
      continue; // then ask again, with the diff in front of the person
    }
    return { decision: (choice && DECISIONS[choice]) || 'reject' };
  }
}

export async function askUser(params: AskUserParams, token: vscode.CancellationToken): Promise<AskUserResult> {
  const cancelled: AskUserResult = { cancelled: true };
  let answer: string | undefined;
  if (params.options && params.options.length > 0) {
    answer = await unlessCancelled(vscode.window.showQuickPick(params.options, {
      title: 'ToyCoder asks',
      placeHolder: params.question,
      ignoreFocusOut: true,
    }, token), token, undefined);
  } else {
    answer = await unlessCancelled(vscode.window.showInputBox({
      title: 'ToyCoder asks',
      prompt: params.question,
      ignoreFocusOut: true,
    }, token), token, undefined);
  }
  if (token.isCancellationRequested || answer === undefined) return cancelled;
  return { answer };
}

export const TRUST = 'Trust';
export const TRUST_ONCE = 'Once';
const TRUST_ANSWERS: Record<string, WorkspaceTrustResult['decision']> = { [TRUST]: 'trust', [TRUST_ONCE]: 'once', [DENY]: 'deny' };

export function trustDetail(params: WorkspaceTrustParams): string {
  const lines = [`${params.settingsPath} would add:`];
  for (const hook of params.adds.hooks) lines.push(`hook: ${hook}`);
  for (const server of params.adds.mcpServers) lines.push(`MCP server: ${server}`);
  for (const rule of params.adds.allow) lines.push(`allow rule: ${rule}`);
  for (const agent of params.adds.agents ?? []) lines.push(`agent: ${agent}`);
  lines.push('Its deny rules apply either way.');
  return lines.join('\n');
}

/** The workspace's settings file: Trust (remembered for this content), Once, or Deny (also dismissing). */
export async function askWorkspaceTrust(
  params: WorkspaceTrustParams, token: vscode.CancellationToken,
): Promise<WorkspaceTrustResult> {
  const choice = await unlessCancelled(
    vscode.window.showWarningMessage(
      "Trust this workspace's ToyCoder settings?",
      { modal: true, detail: trustDetail(params) },
      TRUST, TRUST_ONCE, DENY,
    ),
    token,
    undefined,
  );
  if (token.isCancellationRequested) return { decision: 'deny' };
  return { decision: (choice && TRUST_ANSWERS[choice]) || 'deny' };
}
