/**
 * A turn's file changes as a card at the end of the turn: "N files changed +a −r", the files (a
 * click opens one, its Diff shows what the turn did to it), Undo (restore the turn) and a Revert per file (restore only that path). A
 * restore's answer is shown on the card: what was restored, each conflict with its reason and a
 * Force button, the daemon's note. The daemon does the restoring; this only asks and shows.
 */

import { ChangedFile, changesSummary, isChangesUpdate, RestoreResult } from '../shared/checkpoints';
import type { RestoreRequest, ToHost, ToWebview } from '../shared/messages';
import type { TranscriptEntry } from '../shared/protocol';
import { h } from './dom';

const STATUS_MARK: Record<string, string> = { created: 'A', modified: 'M', deleted: 'D' };

function button(cls: string, label: string, title: string, onClick: () => void): HTMLButtonElement {
  const b = h('button', cls, label);
  b.type = 'button';
  b.title = title;
  b.addEventListener('click', onClick);
  return b;
}

function stat(n: number | undefined, sign: '+' | '\u2212', cls: string): HTMLElement {
  return h('span', cls, n === undefined ? '' : ` ${sign}${n}`);
}

/** `restore`: the card of a restore (its Undo re-applies what was undone, so it says Redo). */
export function changesCard(turnId: string, files: ChangedFile[], post: (m: ToHost) => void, restore = false): HTMLElement {
  const card = h('div', restore ? 'changes-card changes-of-restore' : 'changes-card');
  card.dataset.turnId = turnId;
  card.setAttribute('role', 'group');
  card.setAttribute('aria-label', changesSummary(files));
  const ask = (request: RestoreRequest, b: HTMLButtonElement) => {
    b.disabled = true; // one request at a time from a button; the answer re-enables what still applies
    card.dataset.state = 'restoring';
    post({ type: 'restore', request });
  };

  const head = h('div', 'changes-head');
  const undo = restore
    ? button('changes-undo', 'Redo', 'Undo this restore: put the files back as the turn left them', () => ask({ turnId }, undo))
    : button('changes-undo', 'Undo', 'Put every file back as it was before this turn (and later turns)', () => ask({ turnId }, undo));
  head.append(h('span', 'changes-summary', `${restore ? 'Restored: ' : ''}${changesSummary(files)}`), undo);
  card.append(head);

  const list = h('ul', 'changes-files');
  for (const f of files) {
    const li = h('li', `changes-file status-${f.status}`);
    li.dataset.path = f.path;
    const open = h('a', 'changes-path', f.path);
    open.href = '#';
    open.title = f.status === 'deleted' ? 'Deleted by this turn' : 'Open the file';
    open.addEventListener('click', (e) => {
      e.preventDefault();
      e.stopPropagation(); // not the chat's link handler
      post({ type: 'openFile', uri: f.uri });
    });
    const diff = button('changes-diff', 'Diff', `What this turn did to ${f.path}`,
      () => post({ type: 'turnDiff', request: { turnId, path: f.path } }));
    const revert = button('changes-revert', 'Revert', `Put ${f.path} back as it was before this turn`,
      () => ask({ turnId, paths: [f.path] }, revert));
    li.append(h('span', 'changes-status', STATUS_MARK[f.status] ?? '?'), open, stat(f.added, '+', 'diff-stat-add'),
      stat(f.removed, '\u2212', 'diff-stat-del'), diff, revert);
    list.append(li);
  }
  card.append(list, h('div', 'changes-result'));
  return card;
}

/** The restore's answer on its card; conflicts get a Force button (restore them, overwriting). */
export function showRestoreResult(card: HTMLElement, request: RestoreRequest, result: RestoreResult,
  post: (m: ToHost) => void): void {
  const box = card.querySelector<HTMLElement>('.changes-result')!;
  box.replaceChildren();
  card.dataset.state = result.conflicts.length ? 'conflicts' : 'restored';
  for (const path of result.restored) {
    card.querySelector<HTMLElement>(`li[data-path="${CSS.escape(path)}"]`)?.classList.add('restored');
  }
  if (result.restored.length) box.append(h('div', 'changes-restored', `Restored ${result.restored.join(', ')}`));
  else if (!result.conflicts.length) box.append(h('div', 'changes-restored', 'Nothing to restore.'));
  if (result.conflicts.length) {
    const list = h('ul', 'changes-conflicts');
    for (const c of result.conflicts) {
      list.append(h('li', 'changes-conflict', `${c.path}: ${c.reason}`));
    }
    const paths = result.conflicts.map((c) => c.path);
    const force = button('changes-force', 'Force', 'Overwrite these files with the version before this turn', () => {
      force.disabled = true;
      post({ type: 'restore', request: { turnId: request.turnId, paths, force: true } });
    });
    box.append(h('div', 'changes-conflict-head', 'Not restored: changed since the agent wrote them.'), list, force);
  }
  if (result.note) box.append(h('div', 'changes-note', result.note));
  // Undo stays available after a partial restore (Force covers the rest); a done one cannot repeat
  const undo = card.querySelector<HTMLButtonElement>('.changes-undo')!;
  undo.disabled = result.conflicts.length === 0 && request.paths === undefined;
  for (const b of card.querySelectorAll<HTMLButtonElement>('.changes-revert')) {
    const li = b.closest('li')!;
    b.disabled = li.classList.contains('restored');
  }
}

export function showRestoreFailed(card: HTMLElement, message: string): void {
  card.dataset.state = 'failed';
  card.querySelector<HTMLElement>('.changes-result')!.replaceChildren(h('div', 'changes-error', message));
  for (const b of card.querySelectorAll<HTMLButtonElement>('.changes-undo, .changes-revert')) {
    b.disabled = b.closest('li')?.classList.contains('restored') ?? false;
  }
}

/** Routes the host's messages about changes: a `changes` update adds a card to the current turn. */
export class ChangesView {
  private readonly post: (m: ToHost) => void;
  /** Restores asked for and not answered yet: a `changes` update meanwhile is a restore's. */
  private restoring = 0;

  constructor(post: (m: ToHost) => void) {
    this.post = (m) => {
      if (m.type === 'restore') this.restoring++;
      post(m);
    };
  }

  handle(message: ToWebview): void {
    const update: unknown = message.type === 'update' ? message.params.update : undefined;
    if (message.type === 'update' && isChangesUpdate(update) && !message.params.parentToolCallId) {
      const u = update;
      if (u.files.length === 0) return;
      // a restore's card (the daemon says so with restoreOf): "Restored …" with Redo, never an Undo
      const card = changesCard(message.params.turnId, u.files, this.post, !!u.restoreOf || this.restoring > 0);
      // the turn being shown is the conversation's last (chat.ts appends turns in order)
      const turn = document.querySelector('#conversation > .turn:last-of-type > .assistant');
      (turn ?? document.getElementById('conversation'))?.append(card);
      card.scrollIntoView({ block: 'nearest' });
    } else if (message.type === 'transcript') {
      this.transcript(message.entries);
    } else if (message.type === 'restoreResult' || message.type === 'restoreFailed') {
      this.restoring = Math.max(0, this.restoring - 1);
      const card = this.card(message.request.turnId);
      if (!card) return;
      if (message.type === 'restoreResult') showRestoreResult(card, message.request, message.result, this.post);
      else showRestoreFailed(card, message.message);
    }
  }

  /** A loaded session: each `changes` entry's card goes into the turn it follows. */
  private transcript(entries: TranscriptEntry[]): void {
    const turns = document.querySelectorAll<HTMLElement>('#conversation > .turn');
    let index = -1; // the turn chat.ts is drawing, counted the way it creates them
    for (const entry of entries) {
      if (entry.role === 'user') index++;
      else if (index < 0 && (entry.role === 'tool_call' || entry.role === 'tool' || (entry.role === 'assistant' && entry.text))) index = 0;
      else if (entry.role === 'changes' && entry.turnId && entry.files?.length) {
        const turn = turns[Math.max(index, 0)] ?? turns[turns.length - 1];
        const body = turn?.querySelector(':scope > .assistant') ?? document.getElementById('conversation');
        body?.append(changesCard(entry.turnId, entry.files, this.post, !!entry.restoreOf));
      }
    }
  }

  private card(turnId: string): HTMLElement | null {
    const cards = document.querySelectorAll<HTMLElement>(`.changes-card[data-turn-id="${CSS.escape(turnId)}"]`);
    return cards.length ? cards[cards.length - 1] : null;
  }
}
