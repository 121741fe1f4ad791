import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import type * as vscode from 'vscode';
import { AttentionView, PendingAttention, REVIEW_PENDING_KEY } from '../../src/attention';
import { EventEmitter, calls, resetStub } from '../../stubs/vscode';

interface FakeItem { text: string; tooltip: string; command: string; visible: boolean }

function setup(visible: boolean) {
  const changed = new EventEmitter<void>();
  const view: AttentionView & { visible: boolean; badge: vscode.ViewBadge | undefined } = {
    visible,
    badge: undefined,
    onDidChangeVisibility: changed.event,
    setBadge(b) { this.badge = b; },
  };
  const attention = new PendingAttention(view, 'toycoder.showPendingReview');
  assert.ok(calls.some(([n]) => n === 'window.createStatusBarItem'));
  const created = (attention as unknown as { item: FakeItem }).item;
  const contexts = () => calls.filter(([n, a]) => n === 'commands.executeCommand' && a[0] === 'setContext')
    .map(([, a]) => [a[1], a[2]]);
  return { view, attention, item: created, changed, contexts };
}

beforeEach(() => resetStub());

test('a pending request while the view is hidden: a badge and a status-bar item that reveals the chat', () => {
  const { view, attention, item, changed, contexts } = setup(false);
  assert.equal(item.command, 'toycoder.showPendingReview');
  attention.update(['write_file big.py']);
  assert.deepEqual(view.badge, { value: 1, tooltip: 'ToyCoder: a permission request waits' });
  assert.equal(item.visible, true);
  assert.match(item.text, /review 1 request/);
  assert.match(item.tooltip, /write_file big\.py/);
  attention.update(['write_file big.py', 'run_command make']);
  assert.equal(view.badge?.value, 2);
  assert.deepEqual(contexts(), [[REVIEW_PENDING_KEY, true]], 'the context key changes once');

  view.visible = true; // the person opens the chat: the card is in front of them
  changed.fire();
  assert.equal(view.badge, undefined);
  assert.equal(item.visible, false);
  view.visible = false;
  changed.fire();
  assert.equal(item.visible, true);

  attention.update([]);
  assert.equal(view.badge, undefined);
  assert.equal(item.visible, false);
  assert.deepEqual(contexts(), [[REVIEW_PENDING_KEY, true], [REVIEW_PENDING_KEY, false]]);
});

test('no badge while the chat is visible', () => {
  const { view, attention, item, contexts } = setup(true);
  attention.update(['write_file big.py']);
  assert.equal(view.badge, undefined);
  assert.equal(item.visible, false);
  assert.deepEqual(contexts(), [[REVIEW_PENDING_KEY, true]], 'Accept / Reject still work in the diff editor');
  attention.dispose();
});
