/**
 * The one message envelope between the extension host and the chat webview.
 * Both sides import this union: the host posts `ToWebview` messages, the webview posts `ToHost` ones.
 * The webview only renders; every decision (sessions, turns, permissions) is the daemon's,
 * relayed by the host.
 */

import type { CheckpointDiffParams, RestoreParams, RestoreResult } from './checkpoints';
import type {
  CommandInfo, Decision, ImageContext, MentionItem, PermissionParams, PromptResult, SessionInfo, TranscriptEntry,
  UpdateParams,
} from './protocol';

/** How a permission request ended: a decision, or `cancelled` when the daemon withdrew it. */
export type ReviewOutcome = Decision | 'cancelled';
/** Where the decision was made: the card in the chat, or the diff editor's title bar. */
export type ReviewSource = 'chat' | 'editor';

export type Envelope =
  // ---- host -> webview ---------------------------------------------------------------------
  /** The daemon's state; `exited` shows a banner with a Restart button. */
  | { type: 'daemon'; state: 'starting' | 'ready' | 'exited'; message?: string }
  /** Slash-command completion data (from toycoder/commands/list). */
  | { type: 'commands'; commands: CommandInfo[] }
  /** The header row: the session's title and its mode's name ("" when unknown); a click on the mode picks one. */
  | { type: 'header'; title: string; mode: string }
  /** Replace the conversation with a session's transcript (empty for a new session). */
  | { type: 'transcript'; session: SessionInfo | null; entries: TranscriptEntry[] }
  /** A turn of this session runs in another editor (`turn_elsewhere`): its prompt starts a turn here, its
   *  updates follow as `update`s, and `running: false` ends it. */
  | { type: 'elsewhere'; client: string; running: boolean; prompt?: string }
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
  /** A pending toycoder/requestPermission, shown as a card in the chat; `id` is the host's. */
  | { type: 'permission'; id: string; params: PermissionParams }
  /** The request is decided (or withdrawn): its card becomes a one-line record. `by`: the other
   *  editor that decided it (docs/protocol.md, permission_resolved). */
  | { type: 'permissionDecided'; id: string; outcome: ReviewOutcome; source: ReviewSource; by?: string }
  /** Bring this pending card into view (the status-bar item was clicked). */
  | { type: 'showPermission'; id: string }
  /** The answer to a `restore` (Undo, Revert, Force on a changes card). */
  | { type: 'restoreResult'; request: RestoreRequest; result: RestoreResult }
  /** The restore request failed (unknown checkpoint, daemon gone): why. */
  | { type: 'restoreFailed'; request: RestoreRequest; message: string }
  /** What `@prefix` may name (toycoder/mentions/complete), for the prompt box's completion. */
  | { type: 'mentionItems'; prefix: string; items: MentionItem[] }
  /** What the next prompt carries besides its text (selections, images), one chip each. */
  | { type: 'chips'; labels: string[] }
  // ---- webview -> host ---------------------------------------------------------------------
  /** The webview's script has loaded and listens. */
  | { type: 'ready' }
  /** Send this prompt (slash commands included, as typed). */
  | { type: 'prompt'; text: string }
  /** The header row's mode was clicked: the host offers the daemon's modes (toycoder/session/setMode). */
  | { type: 'pickMode' }
  /** The Stop button. */
  | { type: 'cancel' }
  /** The Restart button of the `daemon exited` banner. */
  | { type: 'restart' }
  /** A link in rendered Markdown was clicked. */
  | { type: 'openLink'; href: string }
  /** A code block's Copy button: put its text on the clipboard. */
  | { type: 'copyCode'; text: string }
  /** A code block's Insert button: put its text at the cursor of the active editor. */
  | { type: 'insertCode'; text: string }
  /** A button of a permission card: the decision for request `id`. */
  | { type: 'permissionDecision'; id: string; decision: Decision }
  /** The "Open diff" button of a permission card (the request stays pending). */
  | { type: 'openDiff'; id: string }
  /** A changes card's Undo / Revert / Force: restore that turn (the host adds the session). */
  | { type: 'restore'; request: RestoreRequest }
  /** A file of a changes card was clicked: open it in the editor. */
  | { type: 'openFile'; uri: string }
  /** A file's Diff on a changes card: show what that turn did to it. */
  | { type: 'turnDiff'; request: TurnDiffRequest }
  /** The word before the cursor starts with `@`: complete it. */
  | { type: 'mentions'; prefix: string }
  /** A chip's ×: the next prompt leaves that item out. */
  | { type: 'removeChip'; index: number }
  /** An image pasted or dropped into the prompt box (base64, as the daemon takes it). */
  | { type: 'attachImage'; name: string; image: Omit<ImageContext, 'type'> };

/** What a changes card asks to restore: toycoder/checkpoint/restore's params without the session. */
export type RestoreRequest = Omit<RestoreParams, 'sessionId'>;

/** What a changes card's Diff asks for: toycoder/checkpoint/diff's params without the session. */
export type TurnDiffRequest = Omit<CheckpointDiffParams, 'sessionId'>;

type HostTypes = 'daemon' | 'header' | 'elsewhere' | 'commands' | 'transcript' | 'turnStarted' | 'update' | 'progress' | 'turnEnded'
  | 'turnFailed' | 'notice' | 'focusInput' | 'permission' | 'permissionDecided' | 'showPermission' | 'restoreResult'
  | 'restoreFailed' | 'mentionItems' | 'chips';

export type ToWebview = Extract<Envelope, { type: HostTypes }>;
export type ToHost = Exclude<Envelope, { type: HostTypes }>;

const TO_HOST: ReadonlySet<string> = new Set<ToHost['type']>(['ready', 'prompt', 'pickMode', 'cancel', 'restart', 'openLink',
  'copyCode', 'insertCode', 'permissionDecision', 'openDiff', 'restore', 'openFile', 'turnDiff', 'mentions', 'removeChip', 'attachImage']);
const DECISIONS: ReadonlySet<string> = new Set<Decision>(['allow_once', 'allow_always', 'reject']);

/** Validate what arrives from the webview (its content is untrusted input to the host). */
export function isToHost(value: unknown): value is ToHost {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as { type?: unknown; text?: unknown; href?: unknown; id?: unknown; decision?: unknown; uri?: unknown;
    request?: unknown; prefix?: unknown; index?: unknown; name?: unknown; image?: unknown };
  if (typeof m.type !== 'string' || !TO_HOST.has(m.type)) return false;
  if (m.type === 'prompt' || m.type === 'copyCode' || m.type === 'insertCode') return typeof m.text === 'string';
  if (m.type === 'openLink') return typeof m.href === 'string';
  if (m.type === 'openDiff') return typeof m.id === 'string';
  if (m.type === 'openFile') return typeof m.uri === 'string';
  if (m.type === 'restore') return isRestoreRequest(m.request);
  if (m.type === 'turnDiff') return isTurnDiffRequest(m.request);
  if (m.type === 'mentions') return typeof m.prefix === 'string';
  if (m.type === 'removeChip') return Number.isInteger(m.index) && (m.index as number) >= 0;
  if (m.type === 'attachImage') {
    const image = m.image as { mimeType?: unknown; data?: unknown } | null;
    return typeof m.name === 'string' && typeof image === 'object' && image !== null
      && typeof image.mimeType === 'string' && typeof image.data === 'string';
  }
  if (m.type === 'permissionDecision') return typeof m.id === 'string' && typeof m.decision === 'string' && DECISIONS.has(m.decision);
  return true;
}

function isTurnDiffRequest(value: unknown): value is TurnDiffRequest {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as { turnId?: unknown; path?: unknown };
  return typeof r.turnId === 'string' && r.turnId !== '' && typeof r.path === 'string' && r.path !== '';
}

function isRestoreRequest(value: unknown): value is RestoreRequest {
  if (typeof value !== 'object' || value === null) return false;
  const r = value as { turnId?: unknown; paths?: unknown; force?: unknown };
  return typeof r.turnId === 'string' && r.turnId !== ''
    && (r.paths === undefined || (Array.isArray(r.paths) && r.paths.every((p) => typeof p === 'string')))
    && (r.force === undefined || typeof r.force === 'boolean');
}
