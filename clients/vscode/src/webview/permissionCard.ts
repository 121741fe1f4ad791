/**
 * A pending permission request as a card in the chat: the whole diff (coloured as a diff, with line
 * numbers, scrollable) or the command and its directory, and the buttons. A button posts its
 * decision string; the card changes only when the host says the request is decided (from here or
 * from the diff editor), and then it becomes a one-line record. Text goes in through textContent only.
 */

import type { ReviewOutcome, ReviewSource, ToHost } from '../shared/messages';
import type { Decision, PermissionParams } from '../shared/protocol';
import { h } from './dom';

const MAX_DIFF_LINES = 5000; // beyond this, "Open diff" is the way to read it

export function diffStats(diff: string): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of diff.split('\n')) {
    if (line.startsWith('+') && !line.startsWith('+++')) added++;
    else if (line.startsWith('-') && !line.startsWith('---')) removed++;
  }
  return { added, removed };
}

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/** The unified diff as rows: old and new line numbers, then the line, classed by its kind. */
export function renderDiff(diff: string): HTMLElement {
  const table = h('div', 'diff');
  table.setAttribute('role', 'table');
  const lines = diff.replace(/\n$/, '').split('\n');
  let oldNo = 0;
  let newNo = 0;
  for (const raw of lines.slice(0, MAX_DIFF_LINES)) {
    const line = raw.replace(/\r$/, '');
    let kind = 'ctx';
    let left = '';
    let right = '';
    const hunk = HUNK.exec(line);
    if (hunk) {
      kind = 'hunk';
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
    } else if (/^(---|\+\+\+|diff |index )/.test(line)) {
      kind = 'meta';
    } else if (line.startsWith('+')) {
      kind = 'add';
      right = String(newNo++);
    } else if (line.startsWith('-')) {
      kind = 'del';
      left = String(oldNo++);
    } else if (line.startsWith('\\')) {
      kind = 'note';
    } else {
      left = String(oldNo++);
      right = String(newNo++);
    }
    const row = h('div', `diff-line diff-${kind}`);
    row.setAttribute('role', 'row');
    row.append(h('span', 'diff-no', left), h('span', 'diff-no', right), h('span', 'diff-text', line || ' '));
    table.append(row);
  }
  if (lines.length > MAX_DIFF_LINES) {
    table.append(h('div', 'diff-line diff-note', `… ${lines.length - MAX_DIFF_LINES} more lines: Open diff shows them all`));
  }
  return table;
}

/** Long lines wrap so a narrow side bar shows them whole; this button turns wrapping off (and on). */
function wrapToggle(diff: HTMLElement): HTMLButtonElement {
  const b = h('button', 'diff-wrap-toggle', 'No wrap');
  b.type = 'button';
  b.title = 'Show each line on one row (scroll sideways)';
  b.setAttribute('aria-pressed', 'false');
  b.addEventListener('click', () => {
    const nowrap = diff.classList.toggle('nowrap');
    b.setAttribute('aria-pressed', String(nowrap));
    b.textContent = nowrap ? 'Wrap' : 'No wrap';
    b.title = nowrap ? 'Wrap long lines' : 'Show each line on one row (scroll sideways)';
  });
  return b;
}

const BUTTONS: Array<[string, Decision, string]> = [
  ['Allow once', 'allow_once', 'allow'],
  ['Always allow', 'allow_always', 'always'],
  ['Deny', 'reject', 'deny'],
];

export function permissionCard(id: string, params: PermissionParams, post: (m: ToHost) => void): HTMLElement {
  const card = h('div', 'permission-card');
  card.dataset.reviewId = id;
  card.dataset.toolCallId = params.toolCallId;
  card.dataset.title = params.title;
  card.dataset.state = 'pending';
  card.tabIndex = -1;
  card.setAttribute('role', 'group');
  card.setAttribute('aria-label', `Permission request: ${params.title}`);

  const head = h('div', 'permission-head');
  head.append(h('span', 'permission-question', `ToyCoder wants to run ${params.title}`),
    h('span', `permission-level level-${params.level}`, params.level));
  card.append(head);

  const preview = params.preview;
  if (preview?.kind === 'diff') {
    const { added, removed } = diffStats(preview.diff);
    const file = h('div', 'permission-file');
    const diff = renderDiff(preview.diff);
    file.append(h('span', 'permission-path', preview.path), h('span', 'diff-stat-add', ` +${added}`),
      h('span', 'diff-stat-del', ` −${removed}`));
    card.append(file, diff);
  } else if (preview?.kind === 'command') {
    const cmd = h('pre', 'permission-command');
    cmd.append(h('span', 'permission-prompt', '$ '), preview.command);
    card.append(cmd);
    if (preview.cwd) card.append(h('div', 'permission-cwd', `in ${preview.cwd}`));
  } else {
    card.append(h('pre', 'permission-args', JSON.stringify(params.arguments, null, 2) ?? ''));
  }

  const actions = h('div', 'permission-actions');
  const buttons: HTMLButtonElement[] = [];
  for (const [label, decision, cls] of BUTTONS) {
    const b = h('button', `permission-${cls}`, label);
    b.type = 'button';
    b.addEventListener('click', () => {
      for (const other of buttons) other.disabled = true; // one answer; the host confirms it
      card.dataset.state = 'answered';
      post({ type: 'permissionDecision', id, decision });
    });
    buttons.push(b);
    actions.append(b);
  }
  const diff = card.querySelector<HTMLElement>(':scope > .diff');
  if (diff) actions.append(wrapToggle(diff));
  if (preview?.kind === 'diff') {
    const open = h('button', 'permission-open-diff', 'Open diff');
    open.type = 'button';
    open.title = 'Open it in the diff editor; Accept / Reject are in its title bar';
    open.addEventListener('click', () => post({ type: 'openDiff', id }));
    actions.append(open);
  }
  card.append(actions);
  return card;
}

const RECORDS: Record<ReviewOutcome, [string, string]> = {
  allow_once: ['\u2713', 'Allowed once'],
  allow_always: ['\u2713', 'Always allowed'],
  reject: ['\u2298', 'Denied'],
  cancelled: ['\u25A0', 'Withdrawn (the turn ended before a decision)'],
};

/** The card becomes one line: what was decided, about what, and where. */
export function recordDecision(card: HTMLElement, outcome: ReviewOutcome, source: ReviewSource, by?: string): void {
  const title = card.dataset.title ?? '';
  const [icon, text] = RECORDS[outcome];
  card.className = 'permission-record';
  card.dataset.state = outcome;
  card.removeAttribute('role');
  const where = by ? ` (in ${by})` : source === 'editor' ? ' (in the diff editor)' : '';
  card.replaceChildren(h('span', 'permission-record-icon', icon), h('span', 'permission-record-text', `${text}${where}: `),
    h('span', 'permission-record-title', title));
}
