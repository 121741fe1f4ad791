/**
 * The one message envelope between the extension host and the chat webview.
 * Both sides import this union: the host posts `ToWebview` messages, the webview posts `ToHost` ones.
 * The webview only renders; every decision (sessions, turns, permissions) is the daemon's,
 * relayed by the host.
 */

import type { CommandInfo, PromptResult, SessionInfo, TranscriptEntry, UpdateParams } from './protocol';

export type Envelope =
  // ---- host -> webview ---------------------------------------------------------------------
  /** The daemon's state; `exited` shows a banner with a Restart button. */
  | { type: 'daemon'; state: 'starting' | 'ready' | 'exited'; message?: string }
  /** Slash-command completion data (from toycoder/commands/list). */
  | { type: 'commands'; commands: CommandInfo[] }
  /** Replace the conversation with a session's transcript (empty for a new session). */
  | { type: 'transcript'; session: SessionInfo | null; entries: TranscriptEntry[] }
  /** A turn starts: echo the prompt and show the Stop button. */
  | { type: 'turnStarted'; text: string }
  /** A toycoder/update notification of the current session, as the daemon sent it. */
  | { type: 'update'; params: UpdateParams }
  /** The work-done progress message of the running turn (null clears it). */
  | { type: 'progress'; message: string | null }
  /** The toycoder/prompt answer. */
  | { type: 'turnEnded'; result: PromptResult }
  /** The toycoder/prompt request failed (provider error, config error, daemon gone). */
  | { type: 'turnFailed'; message: string }
  /** A line for the conversation that is not part of a turn. */
  | { type: 'notice'; level: 'info' | 'error'; text: string }
  /** Put text in the prompt box and focus it. */
  | { type: 'focusInput'; text?: string }
  // ---- webview -> host ---------------------------------------------------------------------
  /** The webview's script has loaded and listens. */
  | { type: 'ready' }
  /** Send this prompt (slash commands included, as typed). */
  | { type: 'prompt'; text: string }
  /** The Stop button. */
  | { type: 'cancel' }
  /** The Restart button of the `daemon exited` banner. */
  | { type: 'restart' }
  /** A link in rendered Markdown was clicked. */
  | { type: 'openLink'; href: string };

type HostTypes = 'daemon' | 'commands' | 'transcript' | 'turnStarted' | 'update' | 'progress' | 'turnEnded'
  | 'turnFailed' | 'notice' | 'focusInput';

export type ToWebview = Extract<Envelope, { type: HostTypes }>;
export type ToHost = Exclude<Envelope, { type: HostTypes }>;

const TO_HOST: ReadonlySet<string> = new Set<ToHost['type']>(['ready', 'prompt', 'cancel', 'restart', 'openLink']);

/** Validate what arrives from the webview (its content is untrusted input to the host). */
export function isToHost(value: unknown): value is ToHost {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as { type?: unknown; text?: unknown; href?: unknown };
  if (typeof m.type !== 'string' || !TO_HOST.has(m.type)) return false;
  if (m.type === 'prompt') return typeof m.text === 'string';
  if (m.type === 'openLink') return typeof m.href === 'string';
  return true;
}
