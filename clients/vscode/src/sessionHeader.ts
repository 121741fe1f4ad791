/**
 * The view's description: the session's title and permission mode, as the daemon last said
 * (session/new, session/load, setMode, the `session_info` update), and the mode picker.
 */

import * as vscode from 'vscode';
import type { SessionInfo } from './shared/protocol';

/** One of initialize's `availableModes`. */
export interface ModeInfo {
  id: string;
  name: string;
  description?: string;
}

/** What the mode picker needs of the daemon. */
export interface ModeDaemon {
  readonly availableModes?: ModeInfo[];
  setMode?(sessionId: string, mode: string): Promise<SessionInfo>;
}

const MAX_TITLE = 60;

export class SessionHeader {
  private title = '';
  private mode = '';
  /** The daemon's modes, for their names. */
  modes: ModeInfo[] = [];

  /** `setDescription`: the view's description; `onChange`: the webview's header row (title, mode's name). */
  constructor(private readonly setDescription: (text: string) => void,
    private readonly onChange: (title: string, mode: string) => void = () => undefined) {}

  get currentMode(): string {
    return this.mode;
  }

  /** A session's info (null: a new conversation that has no session yet). */
  show(info: SessionInfo | null): void {
    this.title = info?.title ?? '';
    if (info?.mode || !info) this.mode = info?.mode ?? '';
    this.render();
  }

  /** Until the daemon titles a new session, its first prompt's first line does (as the daemon does). */
  prompted(text: string): void {
    if (this.title || text.startsWith('/')) return;
    let fenced = false; // lines inside code fences are skipped, as the daemon does
    const line = text.split('\n').map((l) => l.trim()).find((l) => {
      if (l.startsWith('```')) fenced = !fenced;
      return !fenced && l !== '' && !l.startsWith('```');
    }) ?? '';
    this.title = line.length > MAX_TITLE ? `${line.slice(0, MAX_TITLE - 1)}…` : line;
    this.render();
  }

  label(modes: ModeInfo[] = []): string {
    return [this.title, this.modeName(modes)].filter(Boolean).join(' · ');
  }

  private modeName(modes: ModeInfo[]): string {
    return modes.find((m) => m.id === this.mode)?.name ?? this.mode;
  }

  private render(): void {
    this.setDescription(this.label(this.modes));
    this.onChange(this.title, this.modeName(this.modes));
  }
}

/** The quick pick of the daemon's modes; the chosen one is set on the session. Returns the new info. */
export async function pickMode(daemon: ModeDaemon, sessionId: string, current: string): Promise<SessionInfo | undefined> {
  const modes = daemon.availableModes ?? [];
  if (!daemon.setMode || modes.length === 0) {
    void vscode.window.showInformationMessage('ToyCoder: this daemon offers no modes.');
    return undefined;
  }
  const items = modes.map((m) => ({ label: m.name, description: m.id === current ? 'current' : '', detail: m.description, id: m.id }));
  const pick = await vscode.window.showQuickPick(items, { title: 'ToyCoder: Mode', placeHolder: 'What may run without asking' });
  if (!pick) return undefined;
  return daemon.setMode(sessionId, pick.id);
}

/** The session quick pick (newest first, as the daemon lists them); the chosen one's id. */
export async function pickSession(sessions: SessionInfo[], current: string | undefined): Promise<{ sessionId: string } | undefined> {
  if (sessions.length === 0) {
    void vscode.window.showInformationMessage('ToyCoder: no sessions in this workspace yet.');
    return undefined;
  }
  const items = sessions.map((s) => ({
    label: s.title || '(untitled)',
    description: `${s.messageCount} messages · ${s.updatedAt.replace('T', ' ').replace(/\+00:00$|Z$/, ' UTC')}`,
    detail: s.sessionId === current ? `${s.sessionId} (current)` : s.sessionId,
    sessionId: s.sessionId,
  }));
  const pick = await vscode.window.showQuickPick(items, { title: 'ToyCoder: Switch Session', placeHolder: 'Resume a session', matchOnDetail: true });
  return pick;
}
