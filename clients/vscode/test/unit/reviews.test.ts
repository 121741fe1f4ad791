import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import { PendingReview, ReviewHost, Reviews } from '../../src/reviews';
import type { ToWebview } from '../../src/shared/messages';
import type { PermissionParams, PermissionResult } from '../../src/shared/protocol';
import { CancellationTokenSource, resetStub } from '../../stubs/vscode';

const writeRequest: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_1', tool: 'write_file', level: 'sensitive',
  title: 'write_file big.py', arguments: { path: 'big.py' },
  preview: { kind: 'diff', path: 'big.py', diff: '--- /dev/null\n+++ b/big.py\n@@ -0,0 +1 @@\n+x = 1\n' },
};
const commandRequest: PermissionParams = {
  sessionId: 's', turnId: 's-1', toolCallId: 'call_2', tool: 'run_command', level: 'dangerous',
  title: 'run_command make', arguments: { command: 'make' }, preview: { kind: 'command', command: 'make', cwd: '/ws' },
};

function setup() {
  const posted: ToWebview[] = [];
  const opened: string[] = [];
  const closed: string[][] = [];
  const pendingCounts: number[] = [];
  let nextDoc = 1;
  const host: ReviewHost = {
    post: (m) => { posted.push(m); },
    openDiff: async (preview) => {
      const uris = [`toycoder-proposal:/${preview.path}?${nextDoc++}`];
      opened.push(...uris);
      return uris;
    },
    closeTabs: async (uris) => { closed.push(uris); },
    pendingChanged: (pending: readonly PendingReview[]) => { pendingCounts.push(pending.length); },
    log: () => undefined,
  };
  return { reviews: new Reviews(host), posted, opened, closed, pendingCounts };
}

/** Whether the promise has settled, without waiting for it. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => { done = true; });
  await new Promise((r) => setImmediate(r));
  return done;
}

beforeEach(() => resetStub());

test('a request is a card in the chat and stays pending until a button is pressed', async () => {
  const { reviews, posted, pendingCounts } = setup();
  const answer = reviews.request(writeRequest, new CancellationTokenSource().token);
  assert.equal(posted.length, 1);
  const card = posted[0];
  assert.ok(card.type === 'permission');
  assert.deepEqual(card.params, writeRequest);
  assert.equal(await settled(answer), false, 'no answer before a decision');
  assert.deepEqual(reviews.pendingReviews.map((p) => p.id), [card.id]);
  assert.equal(reviews.decide(card.id, 'allow_always'), true);
  assert.deepEqual(await answer, { decision: 'allow_always' });
  assert.deepEqual(posted[1], { type: 'permissionDecided', id: card.id, outcome: 'allow_always', source: 'chat' });
  assert.deepEqual(pendingCounts, [1, 0]);
  assert.equal(reviews.decide(card.id, 'reject'), false, 'one decision: a second is ignored');
  assert.equal(posted.length, 2);
});

test('Open diff does not answer; Accept in the diff editor does, and closes its tabs', async () => {
  const { reviews, posted, opened, closed } = setup();
  const answer = reviews.request(writeRequest, new CancellationTokenSource().token);
  const id = (posted[0] as { id: string }).id;
  await reviews.openDiff(id);
  await reviews.openDiff(id); // twice: both tabs belong to it
  assert.equal(opened.length, 2);
  assert.equal(await settled(answer), false, 'the diff editor does not block or answer');
  assert.equal(reviews.decideByUri('toycoder-proposal:/other.py?9', 'allow_once'), false, 'not a proposal of this request');
  assert.equal(reviews.decideByUri(opened[1], 'allow_once'), true);
  assert.deepEqual(await answer, { decision: 'allow_once' });
  assert.deepEqual(posted[1], { type: 'permissionDecided', id, outcome: 'allow_once', source: 'editor' });
  assert.deepEqual(closed, [opened]);
  assert.equal(reviews.decide(id, 'reject'), false, 'the card cannot decide it again');
});

test('Deny from the card closes the diff tabs too', async () => {
  const { reviews, posted, opened, closed } = setup();
  const answer = reviews.request(writeRequest, new CancellationTokenSource().token);
  const id = (posted[0] as { id: string }).id;
  await reviews.openDiff(id);
  reviews.decide(id, 'reject');
  assert.deepEqual(await answer, { decision: 'reject' });
  assert.deepEqual(closed, [opened]);
});

test('the daemon withdrawing the request ($/cancelRequest) ends it as cancelled', async () => {
  const { reviews, posted, opened, closed, pendingCounts } = setup();
  const source = new CancellationTokenSource();
  const answer = reviews.request(writeRequest, source.token);
  const id = (posted[0] as { id: string }).id;
  await reviews.openDiff(id);
  source.cancel();
  assert.deepEqual(await answer, { decision: 'reject' });
  assert.deepEqual(posted[1], { type: 'permissionDecided', id, outcome: 'cancelled', source: 'chat' });
  assert.deepEqual(closed, [opened]);
  assert.deepEqual(pendingCounts, [1, 0]);
  const early = new CancellationTokenSource();
  early.cancel();
  assert.deepEqual(await reviews.request(writeRequest, early.token), { decision: 'reject' });
  assert.equal(posted.length, 2, 'an already-withdrawn request shows no card');
});

test('a decision made in another editor that is handled after the withdrawal still becomes the card\'s record', async () => {
  // vscode-jsonrpc cancels a request's token as it reads $/cancelRequest, ahead of the
  // permission_resolved the daemon sent before it
  const { reviews, posted } = setup();
  const source = new CancellationTokenSource();
  const answer = reviews.request(writeRequest, source.token);
  const id = (posted[0] as { id: string }).id;
  source.cancel();
  assert.deepEqual(await answer, { decision: 'reject' });
  assert.equal(reviews.resolved('call_other', 'allow_once', 'toycoder.nvim'), false, 'another call\'s: nothing');
  assert.equal(reviews.resolved('call_1', 'allow_once', 'toycoder.nvim'), true);
  assert.deepEqual(posted.slice(1), [
    { type: 'permissionDecided', id, outcome: 'cancelled', source: 'chat' },
    { type: 'permissionDecided', id, outcome: 'allow_once', source: 'chat', by: 'toycoder.nvim' }]);
  assert.equal(reviews.resolved('call_1', 'reject', 'toycoder.nvim'), false, 'told once');
});

test('a diff opened after the decision is closed at once; commands have no diff', async () => {
  const { reviews, posted, opened, closed } = setup();
  let release!: () => void;
  const slow = new Promise<void>((r) => { release = r; });
  const host = (reviews as unknown as { host: ReviewHost }).host;
  const openDiff = host.openDiff;
  host.openDiff = async (p) => { await slow; return openDiff(p); };
  const answer = reviews.request(writeRequest, new CancellationTokenSource().token);
  const id = (posted[0] as { id: string }).id;
  const opening = reviews.openDiff(id);
  reviews.decide(id, 'allow_once');
  release();
  await opening;
  await answer;
  assert.deepEqual(closed, [opened]);

  void reviews.request(commandRequest, new CancellationTokenSource().token);
  const cmdId = (posted[posted.length - 1] as { id: string }).id;
  await reviews.openDiff(cmdId);
  assert.equal(opened.length, 1, 'nothing to open for a command');
});

test('a new webview gets the pending cards again; the daemon exiting withdraws them all', async () => {
  const { reviews, posted } = setup();
  const answers: Array<Promise<PermissionResult>> = [
    reviews.request(writeRequest, new CancellationTokenSource().token),
    reviews.request(commandRequest, new CancellationTokenSource().token),
  ];
  posted.length = 0;
  reviews.repost();
  assert.deepEqual(posted.map((m) => m.type === 'permission' && m.params.tool), ['write_file', 'run_command']);
  reviews.cancelAll();
  assert.deepEqual(await Promise.all(answers), [{ decision: 'reject' }, { decision: 'reject' }]);
  assert.deepEqual(posted.slice(2).map((m) => m.type === 'permissionDecided' && m.outcome), ['cancelled', 'cancelled']);
  assert.deepEqual(reviews.pendingReviews, []);
});
