/**
 * The standard LSP shapes the extension reads (not part of the ToyCoder contract, so not generated).
 */

/** `$/progress` values (LSP work-done progress). */
export type ProgressValue =
  | { kind: 'begin'; title: string; message?: string; cancellable?: boolean }
  | { kind: 'report'; message?: string }
  | { kind: 'end'; message?: string };
