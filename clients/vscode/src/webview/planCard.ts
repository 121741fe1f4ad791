/**
 * The plan checklist card: the model's plan (update kind `plan`), whole each time, so each update
 * replaces the card's list in place.
 */

import type { PlanEntryInfo } from '../shared/protocol';
import { h } from './dom';

const MARKS: Record<string, string> = { completed: '✓', in_progress: '▸', pending: '○' };

/** An empty card; fill it with `fillPlan`. */
export function planCard(): HTMLElement {
  const card = h('div', 'plan-card');
  card.append(h('div', 'plan-head'), h('ol', 'plan-entries'));
  return card;
}

export function fillPlan(card: HTMLElement, entries: PlanEntryInfo[]): void {
  card.querySelector('.plan-head')!.textContent = planHead(entries);
  card.querySelector('.plan-entries')!.replaceChildren(...planItems(entries, 'plan-entry'));
}

function planHead(entries: PlanEntryInfo[]): string {
  const done = entries.filter((e) => e.status === 'completed').length;
  return `Plan · ${done}/${entries.length} done`;
}

/** The entries as list items of class `cls` (the card's, or the pinned plan's: compact, without the badge). */
function planItems(entries: PlanEntryInfo[], cls: string, badge = true): HTMLElement[] {
  return entries.map((e) => {
    const item = h('li', `${cls} status-${e.status} priority-${e.priority}`);
    item.dataset.status = e.status;
    const mark = h('span', 'plan-mark', MARKS[e.status] ?? '○');
    mark.setAttribute('aria-label', e.status.replace('_', ' '));
    item.append(mark, h('span', 'plan-content', e.content));
    if (badge && e.priority === 'high' && e.status !== 'completed') item.append(h('span', 'plan-priority', 'high'));
    return item;
  });
}

/**
 * The pinned plan above the conversation (#pinned-plan, a <details>): the head and the step in
 * progress stay in sight while a long turn scrolls the card away; opened, it lists every step.
 */
export function pinPlan(pinned: HTMLDetailsElement, entries: PlanEntryInfo[]): void {
  const active = entries.find((e) => e.status === 'in_progress');
  const summary = h('summary', 'pinned-plan-head', planHead(entries));
  if (active) summary.append(h('span', 'pinned-plan-active', ` · ${MARKS.in_progress} ${active.content}`));
  pinned.replaceChildren(summary, h('ol', 'pinned-plan-entries'));
  pinned.querySelector('.pinned-plan-entries')!.append(...planItems(entries, 'pinned-plan-entry', false));
  pinned.dataset.done = String(entries.every((e) => e.status === 'completed'));
  pinned.hidden = entries.length === 0;
}
