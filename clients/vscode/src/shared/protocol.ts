/**
 * The ToyCoder wire contract (protocol version 1), as TypeScript types.
 * Mirrors toycoder_daemon/protocol.py; docs/protocol.md explains every field.
 * Shared by the extension host and the webview (types only, no runtime code but the names).
 */

export const PROTOCOL_VERSION = 1;

export const Methods = {
  sessionNew: 'toycoder/session/new',
  sessionList: 'toycoder/session/list',
  sessionLoad: 'toycoder/session/load',
  sessionDelete: 'toycoder/session/delete',
  prompt: 'toycoder/prompt',
  cancel: 'toycoder/cancel',
  commandsList: 'toycoder/commands/list',
  update: 'toycoder/update',
  requestPermission: 'toycoder/requestPermission',
  askUser: 'toycoder/askUser',
} as const;

export const ErrorCodes = {
  requestCancelled: -32800,
  sessionNotFound: -32010,
  sessionBusy: -32011,
  providerError: -32012,
  configError: -32013,
} as const;

export type Level = 'safe' | 'sensitive' | 'dangerous';

export interface SessionInfo {
  sessionId: string;
  title: string;
  createdAt: string;
  updatedAt: string;
  messageCount: number;
}

export interface TranscriptEntry {
  role: 'user' | 'assistant' | 'tool_call' | 'tool' | string;
  text: string;
  toolCallId?: string;
  name?: string;
}

export interface SessionLoadResult {
  session: SessionInfo;
  transcript: TranscriptEntry[];
}

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export type Action = { kind: 'switch'; sessionId: string } | { kind: 'quit' };

export type StopReason = 'end_turn' | 'max_steps' | 'cancelled' | 'error' | 'command';

export interface PromptResult {
  turnId: string;
  stopReason: StopReason;
  text: string;
  usage: Usage;
  action?: Action;
}

export interface CommandInfo {
  name: string;
  usage: string;
  help: string;
  aliases: string[];
}

export type ToolStatus = 'completed' | 'failed' | 'denied' | 'cancelled';

export type Update =
  | { kind: 'text_delta'; text: string }
  | { kind: 'tool_call'; toolCallId: string; name: string; title: string; arguments: unknown; permission: Level }
  | { kind: 'tool_result'; toolCallId: string; status: ToolStatus; output: string }
  | ({ kind: 'usage' } & Usage)
  | { kind: 'retry'; attempt: number; delaySeconds: number; reason: string }
  | { kind: 'compaction'; strategy: 'summary' | 'truncate'; before: number; after: number };

export interface UpdateParams {
  sessionId: string;
  turnId: string;
  parentToolCallId?: string;
  update: Update;
}

export type Preview =
  | { kind: 'diff'; path: string; diff: string }
  | { kind: 'command'; command: string; cwd?: string };

export interface PermissionParams {
  sessionId: string;
  turnId: string;
  toolCallId: string;
  tool: string;
  level: Level;
  title: string;
  arguments: unknown;
  preview?: Preview;
}

export type Decision = 'allow_once' | 'allow_always' | 'reject';

export interface PermissionResult {
  decision: Decision;
}

export interface AskUserParams {
  sessionId: string;
  turnId: string;
  question: string;
  options?: string[];
}

export type AskUserResult = { answer: string } | { cancelled: true };

/** `$/progress` values (LSP work-done progress). */
export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; cancellable?: boolean }
  | { kind: 'report'; message?: string }
  | { kind: 'end'; message?: string };
