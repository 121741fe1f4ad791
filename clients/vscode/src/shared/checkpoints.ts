/**
 * The checkpoint wire (issue 11) as the client uses it: the `changes` update a turn (or a restore)
 * that changed files ends with, toycoder/checkpoint/restore and /diff. The shapes are protocol.ts's
 * (generated); both sides of the webview import this.
 */

import type { ChangedFileInfo, ChangesUpdate, RestoreParams as WireRestoreParams } from './protocol';

export type { ChangesUpdate, CheckpointDiff, CheckpointDiffParams, RestoreConflict, RestoreResult } from './protocol';
export type ChangedFile = ChangedFileInfo;

/** toycoder/checkpoint/restore's params; `force` may be left out (false). */
export type RestoreParams = Omit<WireRestoreParams, 'force'> & { force?: boolean };

/** Whether an update is a `changes` one with files. */
export function isChangesUpdate(update: unknown): update is ChangesUpdate {
  const u = update as { kind?: unknown; files?: unknown } | null;
  return typeof u === 'object' && u !== null && u.kind === 'changes' && Array.isArray(u.files);
}

/** "3 files changed +10 −3" (counts a file does not have are left out of the sums). */
export function changesSummary(files: readonly Pick<ChangedFile, 'added' | 'removed'>[]): string {
  const added = files.reduce((n, f) => n + (f.added ?? 0), 0);
  const removed = files.reduce((n, f) => n + (f.removed ?? 0), 0);
  return `${files.length} ${files.length === 1 ? 'file' : 'files'} changed +${added} \u2212${removed}`;
}
