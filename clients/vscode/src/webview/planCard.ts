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
  const done = entries.filter((e) => e.status === 'completed').length;
  card.querySelector('.plan-head')!.textContent = `Plan · ${done}/${entries.length} done`;
  const list = card.querySelector('.plan-entries')!;
  list.replaceChildren(...entries.map((e) => {
    const item = h('li', `plan-entry status-${e.status} priority-${e.priority}`);
    item.dataset.status = e.status;
    const mark = h('span', 'plan-mark', MARKS[e.status] ?? '○');
    mark.setAttribute('aria-label', e.status.replace('_', ' '));
    item.append(mark, h('span', 'plan-content', e.content));
    if (e.priority === 'high' && e.status !== 'completed') item.append(h('span', 'plan-priority', 'high'));
    return item;
  }));
}
