/**
 * The ToyCoder wire contract (protocol version 1), as TypeScript types.
 * GENERATED from toycoder_daemon/wire/protocol.py -- do not edit. Regenerate with
 *   python -m toycoder_daemon.wire.typescript > clients/vscode/src/shared/protocol.ts
 * (tests/unit/wire/test_protocol_ts.py fails when this file is stale). docs/protocol.md explains every field.
 * Shared by the extension host and the webview (types only, no runtime code but the names).
 */

export const PROTOCOL_VERSION = 1;

export const Methods = {
  sessionNew: 'toycoder/session/new',
  sessionList: 'toycoder/session/list',
  sessionLoad: 'toycoder/session/load',
  sessionDelete: 'toycoder/session/delete',
  sessionClose: 'toycoder/session/close',
  sessionSetMode: 'toycoder/session/setMode',
  sessionFork: 'toycoder/session/fork',
  prompt: 'toycoder/prompt',
  cancel: 'toycoder/cancel',
  toolsList: 'toycoder/tools/list',
  toolsSetEnabled: 'toycoder/tools/setEnabled',
  commandsList: 'toycoder/commands/list',
  modelsList: 'toycoder/models/list',
  modelsSet: 'toycoder/models/set',
  checkpointList: 'toycoder/checkpoint/list',
  checkpointRestore: 'toycoder/checkpoint/restore',
  checkpointDiff: 'toycoder/checkpoint/diff',
  mentionsComplete: 'toycoder/mentions/complete',
  resourcesList: 'toycoder/resources/list',
  update: 'toycoder/update',
  commandsChanged: 'toycoder/commands/changed',
  requestPermission: 'toycoder/requestPermission',
  askUser: 'toycoder/askUser',
  workspaceTrust: 'toycoder/workspace/trust',
  diagnostics: 'toycoder/diagnostics',
} as const;

export const ErrorCodes = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  serverNotInitialized: -32002,
  requestCancelled: -32800,
  sessionNotFound: -32010,
  sessionBusy: -32011,
  providerError: -32012,
  configError: -32013,
} as const;

export type Level = 'safe' | 'sensitive' | 'dangerous';

export type ToolStatus = 'completed' | 'failed' | 'denied' | 'cancelled';

export type StopReason = 'end_turn' | 'max_steps' | 'max_tokens' | 'cancelled' | 'error' | 'command';

export type Decision = 'allow_once' | 'allow_always' | 'reject';

export type Update = TextDeltaUpdate | ToolCallUpdate | ToolResultUpdate | UsageUpdate | CompactionUpdate | RetryUpdate | McpWaitUpdate | ChangesUpdate | SessionChangedUpdate | SessionDeletedUpdate | SessionInfoUpdate | PlanUpdate | HookUpdate | TurnElsewhereUpdate | PermissionResolvedUpdate;

export type Action = SwitchAction | QuitAction;

export type Preview = DiffPreview | CommandPreview;

export interface TextDeltaUpdate {
  kind: 'text_delta';
  text: string;
}

export interface ToolCallUpdate {
  kind: 'tool_call';
  toolCallId: string;
  name: string;
  title: string;
  arguments: unknown;
  permission: Level;
}

export interface ToolResultUpdate {
  kind: 'tool_result';
  toolCallId: string;
  status: ToolStatus;
  output: string;
  /** Absolute paths of files the call wrote (editors reload them). */
  changedPaths?: string[];
}

export interface UsageUpdate {
  kind: 'usage';
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface CompactionUpdate {
  kind: 'compaction';
  strategy: 'summary' | 'truncate';
  before: number;
  after: number;
}

export interface RetryUpdate {
  kind: 'retry';
  attempt: number;
  delaySeconds: number;
  reason: string;
}

export interface McpWaitUpdate {
  kind: 'mcp_wait';
  state: 'waiting' | 'done';
  /** The servers waited for (the same in both). */
  servers: string[];
  /** done: those that failed (each also reported with its reason, as window/showMessage). */
  failed?: string[];
}

export interface ChangedFileInfo {
  /** Relative to the workspace root. */
  path: string;
  status: 'created' | 'modified' | 'deleted';
  /** Lines added; absent when either side is not text (binary, too large to keep, a symlink). */
  added?: number;
  /** Lines removed; absent like `added`. */
  removed?: number;
  /** True: the change went into the editor's open buffer (workspace/applyEdit), not to disk, so
there is nothing to reload and no "changed on disk" to warn about. */
  inEditor?: boolean;
  /** The file's absolute file:// URI. */
  uri: string;
}

export interface ChangesUpdate {
  kind: 'changes';
  /** The turn's net change per file (sent once, at the end of a turn or restore that changed files). */
  files: ChangedFileInfo[];
  /** For a restore: the turn it restored (undid; for a restore of a restore, redid). Clients show
"Restored …" with Redo (restoring this restore), never an Undo that re-applies. */
  restoreOf?: string;
}

export interface UsageInfo {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface PlanEntryInfo {
  content: string;
  priority: 'high' | 'medium' | 'low';
  status: 'pending' | 'in_progress' | 'completed';
}

export interface ContextChip {
  type: 'file' | 'selection' | 'diagnostics' | 'image' | 'resource';
  /** What a client shows on the chip: `calc.py`, `calc.py:10-20`, `image.png`... */
  label: string;
  uri?: string;
  mimeType?: string;
  /** For an image: its sha256 (stored once in the data dir's images/). */
  image?: string;
}

export interface TranscriptEntry {
  /** user, assistant, tool_call, tool, changes (after a turn that changed files), compaction (where
earlier turns were summarised for the model: `text` is the summary, "" when they were cut), or plan (last). */
  role: string;
  text: string;
  toolCallId?: string;
  name?: string;
  /** For role "tool": how the call ended. */
  status?: ToolStatus;
  /** For role "changes": the turn's checkpoint id (what toycoder/checkpoint/restore takes). */
  turnId?: string;
  /** For role "changes": the turn's net change per file. */
  files?: ChangedFileInfo[];
  /** For role "assistant": true when a cancel cut the reply short (`text` is what had arrived). */
  interrupted?: boolean;
  /** For role "user": how the turn this prompt started ended (absent while it runs, or if unrecorded). */
  stopReason?: StopReason;
  /** For role "user": that turn's tokens, sub-agents included (with `stopReason`). */
  usage?: UsageInfo;
  /** For role "plan": the session's plan as the history ends (as the `plan` update has it). */
  entries?: PlanEntryInfo[];
  /** For role "changes" of a restore: the turn it restored (as the `changes` update has it). */
  restoreOf?: string;
  /** For role "user": what was attached to the prompt (`context` items and mentions), as chips. */
  context?: ContextChip[];
}

export interface SessionChangedUpdate {
  kind: 'session_changed';
  /** The new history entries, in order (the same shapes session/load answers). */
  transcript: TranscriptEntry[];
  /** True: the other daemon rewrote the session (a repair of tool calls a killed turn left open):
`transcript` is the whole history. A compaction is an addition: a `compaction` entry. */
  reset: boolean;
}

export interface SessionDeletedUpdate {
  kind: 'session_deleted';
  /** One line for the person ("This session was deleted in another editor."). */
  message: string;
}

export interface SessionInfo {
  sessionId: string;
  title: string;
  createdAt: string;
  updatedAt: string;
  messageCount: number;
  /** The permission mode (an id of `availableModes`), for an open session; lists leave it out. */
  mode?: string;
  /** The session's workspace, in lists of other workspaces than the daemon's (`all`, `cwd`). */
  cwd?: string;
  /** Extra roots the tools, search and sandbox treat like the workspace (absent: none). */
  additionalDirectories?: string[];
}

export interface SessionInfoUpdate {
  kind: 'session_info';
  session: SessionInfo;
}

export interface PlanUpdate {
  kind: 'plan';
  entries: PlanEntryInfo[];
}

export interface HookUpdate {
  kind: 'hook';
  /** PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, SessionStart, SessionEnd or PreCompact. */
  event: string;
  command: string;
  outcome: 'ok' | 'blocked' | 'failed' | 'timeout';
  durationMs: number;
  /** Why it blocked or failed; for ok, the text it printed for the person. */
  reason?: string;
  /** Where the hook is configured: the user's config or the workspace's settings file. */
  source?: 'user' | 'workspace';
}

export interface TurnElsewhereUpdate {
  kind: 'turn_elsewhere';
  /** The other daemon's client (its `clientInfo.name`; "another editor" when it gave none). */
  client: string;
  running: boolean;
  /** `running: true`: the prompt that started it (clients show it as the person's line). */
  prompt?: string;
}

export interface PermissionResolvedUpdate {
  kind: 'permission_resolved';
  /** The call asked about; for toycoder/askUser, the ask_user call. */
  toolCallId: string;
  /** A permission's decision, or how a question ended (`dismissed`: no answer). */
  decision: 'allow_once' | 'allow_always' | 'reject' | 'answered' | 'dismissed';
  /** The answering client's `clientInfo.name` ("another editor" when it gave none). */
  by: string;
}

export interface UpdateParams {
  sessionId: string;
  turnId: string;
  parentToolCallId?: string;
  update: Update;
}

export interface CommandInfo {
  name: string;
  usage: string;
  help: string;
  aliases: string[];
  /** builtin, workspace (.toycoder/commands), user ($XDG_CONFIG_HOME/toycoder/commands), a
`commands.paths` folder, or mcp:<server> (an MCP prompt). */
  source: string;
}

export interface CommandList {
  commands: CommandInfo[];
}

export interface SessionNewParams {
  title?: string;
  /** Absolute directories treated like the workspace in this session (its file tools, search, sandbox). */
  additionalDirectories?: string[];
}

export interface SessionListParams {
  /** List that workspace's sessions (an absolute path) instead of the daemon's. */
  cwd?: string;
  /** List every workspace's sessions in the data dir (each with its `cwd`). */
  all: boolean;
  /** The `nextCursor` of the previous page. */
  cursor?: string;
}

export interface SessionList {
  /** Sessions with messages, newest first, a page at a time. */
  sessions: SessionInfo[];
  /** More follow: pass it as `cursor` for the next page. */
  nextCursor?: string;
}

export interface SessionIdParams {
  sessionId: string;
}

export interface SessionLoadResult {
  session: SessionInfo;
  transcript: TranscriptEntry[];
}

export type EmptyResult = Record<string, never>;

export interface SetModeParams {
  sessionId: string;
  mode: string;
}

export interface SessionForkParams {
  sessionId: string;
  /** Branch before this turn: its id (a `changes` entry's `turnId`, toycoder/checkpoint/list's) or
its index (0 = the first); absent: after the last turn (the whole history). */
  atTurn?: string | number;
}

export interface Position {
  /** 0-based, as LSP. */
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface FileContext {
  type: 'file';
  /** file:// URI, or a path relative to the workspace root. */
  uri: string;
  range?: Range;
}

export interface SelectionContext {
  type: 'selection';
  uri: string;
  range: Range;
  text: string;
}

export interface DiagnosticsContext {
  type: 'diagnostics';
  uri: string;
  /** LSP `Diagnostic`s. */
  items: (Record<string, unknown>)[];
}

export interface ImageContext {
  type: 'image';
  /** image/png, image/jpeg, image/gif or image/webp. */
  mimeType: string;
  /** Base64, at most 5 MiB decoded. */
  data: string;
}

export interface ResourceContext {
  type: 'resource';
  server: string;
  uri: string;
}

export interface PromptParams {
  sessionId: string;
  text: string;
  /** What the editor attaches: files, selections, diagnostics, images, MCP resources. `@path`,
`@path#L10-20` and `@server:uri` in `text` attach too. */
  context?: (FileContext | SelectionContext | DiagnosticsContext | ImageContext | ResourceContext)[];
}

export interface SwitchAction {
  kind: 'switch';
  sessionId: string;
}

export interface QuitAction {
  kind: 'quit';
}

export interface PromptResult {
  turnId: string;
  stopReason: StopReason;
  text: string;
  usage: UsageInfo;
  /** What a slash command asks the client to do next. */
  action?: Action;
}

export interface CancelResult {
  cancelled: boolean;
}

export interface ToolInfo {
  name: string;
  description: string;
  permission: Level;
  enabled: boolean;
  source: string;
}

export interface ToolList {
  tools: ToolInfo[];
}

export interface SetEnabledParams {
  sessionId: string;
  name: string;
  /** true or false only: a lax "yes" or 1 must not enable a tool. */
  enabled: boolean;
}

export interface CommandsListParams {
  /** With it, the MCP prompts of the session's servers too (else the config's). */
  sessionId?: string;
}

export interface ModelsListParams {
  sessionId?: string;
}

export interface ModelRef {
  provider: string;
  model: string;
}

export interface ProviderInfo {
  name: string;
  baseUrl?: string;
  models: Record<string, string>;
  /** How many API keys are configured (the keys themselves never leave the daemon). */
  keyCount: number;
  /** The models the provider's server lists (its /v1/models; the current provider only), when it can. */
  servedModels?: string[];
}

export interface ModelsResult {
  current: ModelRef;
  providers: ProviderInfo[];
}

export interface ModelsSetParams {
  sessionId: string;
  provider?: string;
  model: string;
}

export interface CheckpointFile {
  /** Relative to the workspace root. */
  path: string;
  status: 'created' | 'modified' | 'deleted';
  /** Lines added; absent when either side is not text (binary, too large to keep, a symlink). */
  added?: number;
  /** Lines removed; absent like `added`. */
  removed?: number;
  /** True: the change went into the editor's open buffer (workspace/applyEdit), not to disk, so
there is nothing to reload and no "changed on disk" to warn about. */
  inEditor?: boolean;
}

export interface CheckpointInfo {
  /** The turn's id (the `turnId` of its toycoder/prompt answer and updates); restore takes it. */
  turnId: string;
  createdAt: string;
  /** The first line of the turn's prompt ("restore <turn>" for a restore). */
  prompt: string;
  files: CheckpointFile[];
  /** For a restore: the turn it restored. */
  restoreOf?: string;
}

export interface CheckpointList {
  /** Turns that changed files, oldest first. */
  checkpoints: CheckpointInfo[];
}

export interface RestoreParams {
  sessionId: string;
  /** A turn id (or a unique prefix of one, or its number). */
  turnId: string;
  /** Only these files (relative to the workspace root, or absolute); default: every file. */
  paths?: string[];
  /** Overwrite files changed outside the agent since its last write (default: they are conflicts). */
  force?: boolean;
}

export interface RestoreConflict {
  path: string;
  reason: string;
}

export interface RestoreResult {
  /** Paths (relative to the workspace root) now as they were before the turn. */
  restored: string[];
  /** Paths left as they are, each with the reason. */
  conflicts: RestoreConflict[];
  /** Those of `restored` whose change went into the editor's open buffer (workspace/applyEdit),
not to disk: nothing to reload, and no "restored on disk" to warn about. */
  inEditor?: string[];
  /** The restore's own checkpoint (restore it to undo this restore); absent when nothing was written. */
  turnId?: string;
  /** What undo cannot track (files changed by run_command or outside ToyCoder). */
  note: string;
}

export interface CheckpointDiffParams {
  sessionId: string;
  /** A turn id (or a unique prefix of one, or its number), as restore takes it. */
  turnId: string;
  /** A file the turn changed (relative to the workspace root, as its `changes` list it, or absolute). */
  path: string;
}

export interface CheckpointDiff {
  /** Relative to the workspace root. */
  path: string;
  status: 'created' | 'modified' | 'deleted';
  /** The unified diff of the turn's net change to the file (before its first write, after its
last; `/dev/null` for the side where it did not exist); null when a side is not text (binary,
too large to keep, a symlink). */
  diff: string | null;
  /** As in CheckpointFile: the change went into the editor's buffer. */
  inEditor?: boolean;
}

export interface MentionsCompleteParams {
  /** For the session's MCP resources too (else the config's servers'). */
  sessionId?: string;
  /** What follows the `@` so far. */
  prefix: string;
  limit: number;
}

export interface MentionItem {
  /** What follows the `@` when picked: a workspace-relative path (a folder ends with /) or server:uri. */
  label: string;
  kind: 'file' | 'folder' | 'resource';
  uri: string;
}

export interface MentionsResult {
  items: MentionItem[];
}

export interface ResourceInfo {
  server: string;
  uri: string;
  name: string;
  mimeType?: string;
}

export interface ResourcesResult {
  resources: ResourceInfo[];
}

export interface DiffPreview {
  kind: 'diff';
  /** Relative to the workspace root. */
  path: string;
  /** The file's absolute file:// URI. */
  uri?: string;
  diff: string;
}

export interface CommandPreview {
  kind: 'command';
  command: string;
  cwd?: string;
}

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

export interface PermissionResult {
  decision: Decision;
}

export interface AskUserParams {
  sessionId: string;
  turnId: string;
  question: string;
  options?: string[];
}

export interface AskUserResult {
  answer?: string;
  cancelled?: boolean;
}

export interface TrustAdds {
  /** Hook commands the file would run. */
  hooks: string[];
  /** MCP server commands (or URLs) it would start. */
  mcpServers: string[];
  /** Allow rules it would add. */
  allow: string[];
  /** Sub-agents it would add: name, tools, model. */
  agents: string[];
}

export interface WorkspaceTrustParams {
  root: string;
  settingsPath: string;
  adds: TrustAdds;
}

export interface WorkspaceTrustResult {
  /** trust: remembered for this file's content; once: this daemon; deny: none of it (deny rules still apply). */
  decision: 'trust' | 'once' | 'deny';
}

export interface DiagnosticsParams {
  /** The files asked about; empty: every file the editor has diagnostics for. */
  uris: string[];
  /** How long the client may wait for fresh diagnostics (after an edit) before answering. */
  waitMs: number;
}

export interface FileDiagnostics {
  uri: string;
  /** LSP `Diagnostic`s. */
  diagnostics: (Record<string, unknown>)[];
}

export interface DiagnosticsResult {
  items: FileDiagnostics[];
}

/** client -> daemon requests: params and result of each method. */
export interface Requests {
  'toycoder/session/new': { params: SessionNewParams; result: SessionInfo };
  'toycoder/session/list': { params: SessionListParams; result: SessionList };
  'toycoder/session/load': { params: SessionIdParams; result: SessionLoadResult };
  'toycoder/session/delete': { params: SessionIdParams; result: EmptyResult };
  'toycoder/session/close': { params: SessionIdParams; result: EmptyResult };
  'toycoder/session/setMode': { params: SetModeParams; result: SessionInfo };
  'toycoder/session/fork': { params: SessionForkParams; result: SessionLoadResult };
  'toycoder/prompt': { params: PromptParams; result: PromptResult };
  'toycoder/cancel': { params: SessionIdParams; result: CancelResult };
  'toycoder/tools/list': { params: SessionIdParams; result: ToolList };
  'toycoder/tools/setEnabled': { params: SetEnabledParams; result: EmptyResult };
  'toycoder/commands/list': { params: CommandsListParams; result: CommandList };
  'toycoder/models/list': { params: ModelsListParams; result: ModelsResult };
  'toycoder/models/set': { params: ModelsSetParams; result: ModelsResult };
  'toycoder/checkpoint/list': { params: SessionIdParams; result: CheckpointList };
  'toycoder/checkpoint/restore': { params: RestoreParams; result: RestoreResult };
  'toycoder/checkpoint/diff': { params: CheckpointDiffParams; result: CheckpointDiff };
  'toycoder/mentions/complete': { params: MentionsCompleteParams; result: MentionsResult };
  'toycoder/resources/list': { params: SessionIdParams; result: ResourcesResult };
}

/** daemon -> client requests: params and result of each method. */
export interface DaemonRequests {
  'toycoder/requestPermission': { params: PermissionParams; result: PermissionResult };
  'toycoder/askUser': { params: AskUserParams; result: AskUserResult };
  'toycoder/workspace/trust': { params: WorkspaceTrustParams; result: WorkspaceTrustResult };
  'toycoder/diagnostics': { params: DiagnosticsParams; result: DiagnosticsResult };
}

/** daemon -> client notifications: params of each method. */
export interface Notifications {
  'toycoder/update': UpdateParams;
  'toycoder/commands/changed': CommandList;
}
