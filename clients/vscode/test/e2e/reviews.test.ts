/**
 * Inline review against the real daemon: the extension's Reviews answer toycoder/requestPermission
 * for a 120-line write_file. The request stays pending while the diff is open (nothing is written),
 * Accept from the diff editor's title bar writes the file and closes the tab; a turn stopped while
 * a card waits withdraws it ($/cancelRequest), and nothing is written.
 */

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { DaemonClient } from '../../src/daemon';
import { DiffPreview, Reviews } from '../../src/reviews';
import type { ToWebview } from '../../src/shared/messages';
import type { UpdateParams } from '../../src/shared/protocol';
import { applyUnifiedDiff } from '../../src/unifiedDiff';
import { DAEMON_COMMAND, makeWorkspace, startFakeLlm, waitFor, writeConfig } from '../helpers/env';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

const CONTENT = Array.from({ length: 120 }, (_, i) => `ROWS.append(${i + 1})`).join('\n') + '\n';

async function harness(replies: unknown[]) {
  const ws = makeWorkspace();
  const llm = await startFakeLlm(ws.dir, replies);
  cleanups.push(() => llm.stop());
  const posted: ToWebview[] = [];
  const updates: UpdateParams[] = [];
  const stderr: string[] = [];
  const opened: Array<{ preview: DiffPreview; uri: string }> = [];
  const closed: string[] = [];
  const reviews = new Reviews({
    post: (m) => { posted.push(m); },
    openDiff: async (preview) => {
      const uri = `toycoder-proposal:/${preview.path}?${opened.length + 1}`;
      opened.push({ preview, uri });
      return [uri];
    },
    closeTabs: async (uris) => { closed.push(...uris); },
    pendingChanged: () => undefined,
    log: () => undefined,
  });
  const client = await DaemonClient.start({
    command: DAEMON_COMMAND, root: ws.root, configPath: writeConfig(ws, llm.baseUrl), env: ws.env, logLevel: 'INFO',
  }, {
    update: (p) => updates.push(p),
    requestPermission: (p, token) => reviews.request(p, token),
    askUser: async () => ({ cancelled: true }),
    stderr: (line) => stderr.push(line),
  });
  cleanups.push(() => client.dispose());
  const diag = () => `\n--- daemon stderr ---\n${stderr.slice(-30).join('\n')}\n--- fake_llm ---\n${llm.log()}`;
  return { ws, llm, client, reviews, posted, updates, opened, closed, diag };
}

test('a 120-line write waits while its diff is open, then Accept in the diff editor writes it', async () => {
  const h = await harness([
    { tool_calls: [{ name: 'write_file', arguments: { path: 'src/table.py', content: CONTENT } }] },
    { text: 'written' },
  ]);
  const sid = (await h.client.newSession()).sessionId;
  const turn = h.client.prompt(sid, 'write the table');
  const card = await waitFor(() => h.posted.find((m) => m.type === 'permission'), 'the permission card');
  assert.ok(card.type === 'permission');
  assert.equal(card.params.tool, 'write_file');
  const preview = card.params.preview;
  assert.ok(preview?.kind === 'diff');
  assert.equal(preview.diff.split('\n').filter((l) => l.startsWith('+') && !l.startsWith('+++')).length, 120,
    'the card gets the whole diff');

  await h.reviews.openDiff(card.id);
  assert.equal(h.opened.length, 1);
  assert.equal(applyUnifiedDiff('', h.opened[0].preview.diff), CONTENT, 'the diff editor shows what will be written');
  // pending: the daemon waits, nothing is on disk, the turn has not moved on
  await h.client.listSessions(); // a round trip: the daemon is responsive meanwhile
  assert.equal(existsSync(join(h.ws.root, 'src', 'table.py')), false);
  assert.equal(h.updates.some((u) => u.update.kind === 'tool_result'), false, h.diag());

  assert.equal(h.reviews.decideByUri(h.opened[0].uri, 'allow_once'), true);
  const result = await turn;
  assert.equal(result.text, 'written', h.diag());
  assert.equal(readFileSync(join(h.ws.root, 'src', 'table.py'), 'utf8'), CONTENT);
  assert.deepEqual(h.closed, [h.opened[0].uri], 'the diff tab closes with the decision');
  assert.deepEqual(h.posted.filter((m) => m.type === 'permissionDecided'),
    [{ type: 'permissionDecided', id: card.id, outcome: 'allow_once', source: 'editor' }]);
  const results = h.updates.filter((u) => u.update.kind === 'tool_result').map((u) => u.update.kind === 'tool_result' && u.update.status);
  assert.deepEqual(results, ['completed']);
  assert.deepEqual(h.llm.violations(), []);
});

test('a turn stopped while its card waits: the daemon withdraws the request, the card records it, nothing is written', async () => {
  const h = await harness([
    { tool_calls: [{ name: 'write_file', arguments: { path: 'README.md', content: 'replaced\n' } }] },
  ]);
  const before = readFileSync(join(h.ws.root, 'README.md'), 'utf8');
  const sid = (await h.client.newSession()).sessionId;
  const turn = h.client.prompt(sid, 'replace the readme');
  const card = await waitFor(() => h.posted.find((m) => m.type === 'permission'), 'the permission card');
  assert.ok(card.type === 'permission');
  await h.reviews.openDiff(card.id);
  await h.client.cancel(sid);
  const result = await turn;
  assert.equal(result.stopReason, 'cancelled', h.diag());
  const decided = await waitFor(() => h.posted.find((m) => m.type === 'permissionDecided'), 'the withdrawal ($/cancelRequest)');
  assert.deepEqual(decided, { type: 'permissionDecided', id: card.id, outcome: 'cancelled', source: 'chat' });
  assert.deepEqual(h.closed, [h.opened[0].uri]);
  assert.equal(readFileSync(join(h.ws.root, 'README.md'), 'utf8'), before);
  assert.equal(h.reviews.decide(card.id, 'allow_once'), false, 'a late click changes nothing');
  assert.deepEqual(h.reviews.pendingReviews, []);
});
