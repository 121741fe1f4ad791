/**
 * The extension's daemon client (src/daemon.ts) against the real daemon and the scripted model
 * server: streaming, permission (with the diff preview applied by our diff code), ask_user, cancel,
 * $/cancelRequest of a pending question, unsaved buffers, edits through the editor (workspace/applyEdit
 * into stub documents), slash commands, sessions, exit.
 */

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import * as vscode from 'vscode';
import type { CancellationToken } from 'vscode-jsonrpc';
import { applyWorkspaceEdit } from '../../src/applyEdit';
import { DaemonClient, DaemonError, DaemonHandlers } from '../../src/daemon';
import { DocumentSync } from '../../src/documents';
import type { ApplyWorkspaceEditParams, ProgressValue } from '../../src/shared/lsp';
import type {
  AskUserParams, AskUserResult, PermissionParams, PermissionResult, UpdateParams, WorkspaceTrustParams,
} from '../../src/shared/protocol';
import { applyUnifiedDiff } from '../../src/unifiedDiff';
import { StubDocument, Uri } from '../../stubs/vscode';
import { DAEMON_COMMAND, FakeLlm, makeWorkspace, startFakeLlm, TestWorkspace, waitFor, writeConfig } from '../helpers/env';

interface Harness {
  ws: TestWorkspace;
  llm: FakeLlm;
  client: DaemonClient;
  updates: UpdateParams[];
  progress: Array<[string | number, ProgressValue]>;
  stderr: string[];
  exits: Array<[number | null, string | null]>;
  permission: (p: PermissionParams, token: CancellationToken) => Promise<PermissionResult>;
  ask: (p: AskUserParams, token: CancellationToken) => Promise<AskUserResult>;
  text(sessionId: string): string;
}

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

async function harness(replies: unknown[], applyEdit?: DaemonHandlers['applyEdit'],
  workspaceTrust?: DaemonHandlers['workspaceTrust']): Promise<Harness> {
  const ws = makeWorkspace();
  const llm = await startFakeLlm(ws.dir, replies);
  cleanups.push(() => llm.stop());
  const h = {
    ws, llm, updates: [], progress: [], stderr: [], exits: [],
    permission: async () => ({ decision: 'reject' }),
    ask: async () => ({ cancelled: true }),
    text: (sid: string) => h.updates.filter((u) => u.sessionId === sid && !u.parentToolCallId)
      .map((u) => (u.update.kind === 'text_delta' ? u.update.text : '')).join(''),
  } as unknown as Harness;
  const handlers: DaemonHandlers = {
    update: (p) => h.updates.push(p),
    requestPermission: (p, t) => h.permission(p, t),
    askUser: (p, t) => h.ask(p, t),
    progress: (token, value) => h.progress.push([token, value]),
    stderr: (line) => h.stderr.push(line),
    exit: (code, signal) => h.exits.push([code, signal]),
    applyEdit,
    workspaceTrust,
  };
  h.client = await DaemonClient.start({
    command: DAEMON_COMMAND, root: ws.root, configPath: writeConfig(ws, llm.baseUrl), env: ws.env, logLevel: 'INFO',
  }, handlers);
  cleanups.push(() => h.client.dispose());
  return h;
}

function diag(h: Harness): string {
  return `\n--- daemon stderr ---\n${h.stderr.slice(-30).join('\n')}\n--- fake_llm ---\n${h.llm.log()}`;
}

test('initialize, then a streamed reply with progress', async () => {
  const h = await harness([{ text: 'Hello **world**, here is `code`.', chunk_size: 3, chunk_delay: 0.01 }]);
  assert.equal(h.client.serverInfo?.name, 'toycoder-daemon');
  assert.equal(h.client.initializeResult.capabilities.experimental?.toycoder?.protocolVersion, 1);
  const session = await h.client.newSession();
  const result = await h.client.prompt(session.sessionId, 'say hello');
  assert.equal(result.stopReason, 'end_turn', diag(h));
  assert.equal(result.text, 'Hello **world**, here is `code`.');
  assert.equal(h.text(session.sessionId), result.text);
  const deltas = h.updates.filter((u) => u.update.kind === 'text_delta');
  assert.ok(deltas.length > 1, `streamed in pieces, got ${deltas.length}`);
  assert.ok(deltas.every((u) => u.turnId === result.turnId));
  assert.ok(result.usage.totalTokens > 0);
  const kinds = h.progress.map(([, v]) => v.kind);
  assert.equal(kinds[0], 'begin');
  assert.equal(kinds[kinds.length - 1], 'end');
  assert.deepEqual(h.llm.violations(), []);
});

test('permission: the diff preview applies to the file, allow_once writes, reject does not', async () => {
  const h = await harness([
    { tool_calls: [{ name: 'write_file', arguments: { path: 'README.md', content: '# Demo\nA bigger project.\nWith more.\n' } }] },
    { tool_calls: [{ name: 'edit_file', arguments: { path: 'src/app.py', old_string: 'return a + b', new_string: 'return b + a' } }] },
    { text: 'done' },
  ]);
  const asked: PermissionParams[] = [];
  h.permission = async (p) => {
    asked.push(p);
    return { decision: p.tool === 'write_file' ? 'allow_once' : 'reject' };
  };
  const before = readFileSync(join(h.ws.root, 'README.md'), 'utf8');
  const sid = (await h.client.newSession()).sessionId;
  const result = await h.client.prompt(sid, 'edit things');
  assert.equal(result.text, 'done', diag(h));
  assert.equal(asked.length, 2);
  const [write, edit] = asked;
  assert.equal(write.tool, 'write_file');
  assert.equal(write.level, 'sensitive');
  assert.equal(write.sessionId, sid);
  assert.equal(write.preview?.kind, 'diff');
  if (write.preview?.kind !== 'diff') throw new Error('no diff');
  assert.equal(write.preview.path, 'README.md');
  // what "Show diff" displays: the daemon's unified diff applied to the current text
  assert.equal(applyUnifiedDiff(before, write.preview.diff), '# Demo\nA bigger project.\nWith more.\n');
  assert.equal(readFileSync(join(h.ws.root, 'README.md'), 'utf8'), '# Demo\nA bigger project.\nWith more.\n');
  if (edit.preview?.kind !== 'diff') throw new Error('no diff for edit_file');
  assert.equal(applyUnifiedDiff('def add(a, b):\n    return a + b\n', edit.preview.diff), 'def add(a, b):\n    return b + a\n');
  assert.equal(readFileSync(join(h.ws.root, 'src', 'app.py'), 'utf8'), 'def add(a, b):\n    return a + b\n');
  const results = h.updates.filter((u) => u.update.kind === 'tool_result').map((u) => u.update.kind === 'tool_result' && u.update.status);
  assert.deepEqual(results, ['completed', 'denied']);
});

test('ask_user: options answered, free text cancelled', async () => {
  const h = await harness([
    { tool_calls: [{ name: 'ask_user', arguments: { question: 'Which file?', options: ['a.py', 'b.py'] } }] },
    { tool_calls: [{ name: 'ask_user', arguments: { question: 'Anything else?' } }], expect: { last_tool_contains: 'The user answered: b.py' } },
    { text: 'ok', expect: { last_tool_contains: 'did not answer' } },
  ]);
  const asked: AskUserParams[] = [];
  h.ask = async (p) => {
    asked.push(p);
    return p.options ? { answer: p.options[1] } : { cancelled: true };
  };
  const sid = (await h.client.newSession()).sessionId;
  const result = await h.client.prompt(sid, 'ask me');
  assert.equal(result.text, 'ok', diag(h));
  assert.deepEqual(asked.map((a) => [a.question, a.options]), [['Which file?', ['a.py', 'b.py']], ['Anything else?', undefined]]);
  assert.deepEqual(h.llm.violations(), []);
});

test('cancel: a streaming turn stops with stopReason cancelled and the session stays usable', async () => {
  const long = 'word '.repeat(200);
  const h = await harness([{ text: long, chunk_size: 5, chunk_delay: 0.05 }, { text: 'still here' }]);
  const sid = (await h.client.newSession()).sessionId;
  const turn = h.client.prompt(sid, 'talk a lot');
  await waitFor(() => h.text(sid).length > 0, 'the first delta');
  assert.equal(await h.client.cancel(sid), true);
  const result = await turn;
  assert.equal(result.stopReason, 'cancelled', diag(h));
  assert.ok(h.text(sid).length < long.length);
  const next = await h.client.prompt(sid, 'again');
  assert.equal(next.text, 'still here');
  assert.equal(await h.client.cancel(sid), false);
});

test('cancel while a question is pending: the daemon cancels our request ($/cancelRequest)', async () => {
  const h = await harness([{ tool_calls: [{ name: 'ask_user', arguments: { question: 'Wait?' } }] }]);
  let tokenFired = false;
  let asked = false;
  h.ask = (_p, token) => new Promise((resolve) => {
    asked = true;
    token.onCancellationRequested(() => {
      tokenFired = true;
      resolve({ cancelled: true });
    });
  });
  const sid = (await h.client.newSession()).sessionId;
  const turn = h.client.prompt(sid, 'ask and wait');
  await waitFor(() => asked, 'the question');
  await h.client.cancel(sid);
  const result = await turn;
  assert.equal(result.stopReason, 'cancelled', diag(h));
  await waitFor(() => tokenFired, 'the request cancellation to reach our handler');
});

test('unsaved editor text reaches read_file through didOpen/didChange', async () => {
  const h = await harness([
    { tool_calls: [{ name: 'read_file', arguments: { path: 'src/app.py' } }] },
    { text: 'read it' },
  ]);
  const uri = `file://${join(h.ws.root, 'src', 'app.py')}`;
  h.client.didOpen(uri, 'python', 1, 'def add(a, b):\n    return a + b\n');
  h.client.didChange(uri, 2, 'def add(a, b):\n    return a + b  # UNSAVED EDIT\n');
  const sid = (await h.client.newSession()).sessionId;
  await h.client.prompt(sid, 'read app.py');
  const out = h.updates.find((u) => u.update.kind === 'tool_result');
  assert.ok(out && out.update.kind === 'tool_result' && out.update.output.includes('UNSAVED EDIT'), diag(h));
  h.client.didClose(uri);
});

test('workspace/applyEdit: edits to open documents land in them; a clean one is saved, a dirty one keeps its work', async () => {
  let refuse = false;
  const sent: ApplyWorkspaceEditParams[] = [];
  const h = await harness([
    { tool_calls: [{ name: 'edit_file', arguments: { path: 'src/app.py', old_string: 'return a + b', new_string: 'return b + a' } }] },
    { tool_calls: [{ name: 'edit_file', arguments: { path: 'README.md', old_string: 'A tiny project.', new_string: 'A tidy project.' } }] },
    { tool_calls: [{ name: 'read_file', arguments: { path: 'src/app.py' } }] },
    { text: 'done', expect: { last_tool_contains: 'return b + a  # mine' } },
    { tool_calls: [{ name: 'edit_file', arguments: { path: 'src/app.py', old_string: 'b + a', new_string: 'a - b' } }] },
    { text: 'gave up', expect: { last_tool_contains: 'the user closed it' } },
  ], (p) => {
    sent.push(p);
    return refuse ? Promise.resolve({ applied: false, failureReason: 'the user closed it' }) : applyWorkspaceEdit(p);
  });
  h.permission = async () => ({ decision: 'allow_once' });
  const appPath = join(h.ws.root, 'src', 'app.py');
  const readmePath = join(h.ws.root, 'README.md');
  const app = new StubDocument(Uri.file(appPath), 'def add(a, b):\n    return a + b  # mine\n', 'python');
  app.isDirty = true;
  const readme = new StubDocument(Uri.file(readmePath), readFileSync(readmePath, 'utf8'), 'markdown');
  readme.saveResult = () => { writeFileSync(readmePath, readme.getText()); return true; }; // what VS Code's save does
  (vscode.workspace as any).textDocuments = [app, readme];
  const sync = new DocumentSync(h.client, Uri.file(h.ws.root) as unknown as vscode.Uri); // didOpen, then each change
  try {
    const sid = (await h.client.newSession()).sessionId;
    assert.equal((await h.client.prompt(sid, 'swap and tidy')).text, 'done', diag(h));
    // versioned: the document version DocumentSync reported when the daemon read the buffer
    assert.deepEqual(sent[0].edit.documentChanges?.map((c) => c.textDocument?.version), [1]);
    assert.equal(app.getText(), 'def add(a, b):\n    return b + a  # mine\n', 'the edit is on top of the unsaved work');
    assert.equal(app.isDirty, true);
    assert.equal(app.saves, 0);
    assert.equal(readFileSync(appPath, 'utf8'), 'def add(a, b):\n    return a + b\n', 'the daemon did not write the file');
    assert.equal(readme.saves, 1);
    assert.equal(readFileSync(readmePath, 'utf8'), '# Demo\nA tidy project.\n');
    const outputs = h.updates.flatMap((u) => (u.update.kind === 'tool_result' ? [[u.update.status, u.update.output]] : []));
    assert.equal(outputs.length, 3);
    for (const [status, output] of outputs.slice(0, 2)) {
      assert.equal(status, 'completed');
      assert.match(output, /in the editor's buffer/);
    }
    refuse = true;
    assert.equal((await h.client.prompt(sid, 'subtract')).text, 'gave up', diag(h));
    const last = h.updates.filter((u) => u.update.kind === 'tool_result').pop()!.update;
    assert.equal(last.kind === 'tool_result' && last.status, 'failed');
    assert.equal(app.getText(), 'def add(a, b):\n    return b + a  # mine\n');
    assert.deepEqual(h.llm.violations(), []);
  } finally {
    sync.dispose();
  }
});

test('slash commands: /help answers stopReason command, /new answers a switch action, commands/list', async () => {
  const h = await harness([]);
  const commands = await h.client.listCommands();
  assert.ok(commands.some((c) => c.name === 'help' && c.usage.startsWith('/help')));
  const sid = (await h.client.newSession()).sessionId;
  const help = await h.client.prompt(sid, '/help');
  assert.equal(help.stopReason, 'command');
  assert.match(help.text, /\/sessions/);
  const created = await h.client.prompt(sid, '/new side quest');
  assert.equal(created.stopReason, 'command');
  assert.equal(created.action?.kind, 'switch');
  const other = created.action?.kind === 'switch' ? created.action.sessionId : '';
  assert.notEqual(other, sid);
  const loaded = await h.client.loadSession(other);
  assert.equal(loaded.session.sessionId, other);
  const quit = await h.client.prompt(other, '/quit');
  assert.deepEqual(quit.action, { kind: 'quit' });
  assert.equal(h.llm.requestCount(), 0);
});

test('sessions: list and load render a transcript with tool calls', async () => {
  const h = await harness([
    { text: 'Let me look.', tool_calls: [{ name: 'read_file', arguments: { path: 'README.md' } }] },
    { text: 'It is a demo.' },
  ]);
  const sid = (await h.client.newSession()).sessionId;
  await h.client.prompt(sid, 'what is this?');
  const sessions = await h.client.listSessions();
  assert.ok(sessions.some((s) => s.sessionId === sid && s.messageCount > 0));
  const { transcript } = await h.client.loadSession(sid);
  assert.deepEqual(transcript.map((e) => e.role), ['user', 'assistant', 'tool_call', 'tool', 'assistant']);
  assert.equal(transcript[2].name, 'read_file');
  await assert.rejects(h.client.loadSession('no-such-session'), (e: unknown) => e instanceof DaemonError && e.code === -32010);
});

test('a daemon that dies is reported through the exit handler; start failures reject', async () => {
  const h = await harness([]);
  process.kill(h.client.pid!, 'SIGKILL');
  await h.client.waitForExit();
  await waitFor(() => h.exits.length === 1, 'the exit report');
  assert.equal(h.exits[0][1], 'SIGKILL');
  assert.equal(h.client.running, false);
  await assert.rejects(h.client.newSession(), /not running/);
  const noop = { update() {}, requestPermission: async () => ({ decision: 'reject' as const }), askUser: async () => ({ cancelled: true as const }) };
  await assert.rejects(DaemonClient.start({ command: ['/nonexistent/toycoder-daemon'] }, noop), /was not found/);
  await assert.rejects(DaemonClient.start({ command: ['sh', '-c', 'echo broken config >&2; exit 3'] }, noop), /exited during start \(code 3\):\nbroken config/);
});

test('the workspace trust request is answered by the client, then the workspace hook runs as a hook update', async () => {
  const asked: WorkspaceTrustParams[] = [];
  const h = await harness([{ text: 'ok' }], undefined, async (p) => {
    asked.push(p);
    return { decision: 'once' };
  });
  mkdirSync(join(h.ws.root, '.toycoder'));
  writeFileSync(join(h.ws.root, '.toycoder', 'settings.yaml'),
    "hooks:\n  UserPromptSubmit:\n    - hooks: [{type: command, command: 'echo hooked'}]\n");
  const session = await h.client.newSession();
  await h.client.prompt(session.sessionId, 'hello');
  assert.deepEqual(asked.map((p) => p.adds.hooks), [['echo hooked']], diag(h));
  const hooks = h.updates.map((u) => u.update).filter((u) => u.kind === 'hook');
  assert.equal(hooks.length, 1, diag(h));
  assert.equal(hooks[0].kind === 'hook' && hooks[0].event, 'UserPromptSubmit');
});

test('a daemon of another protocol version is said clearly, not only logged', async () => {
  // a stand-in daemon that answers initialize with protocol version 99 (and nothing else)
  const fake = `
    let buf = Buffer.alloc(0);
    process.stdin.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const end = buf.indexOf('\\r\\n\\r\\n');
        if (end < 0) return;
        const len = Number(/Content-Length: (\\d+)/i.exec(buf.slice(0, end).toString())[1]);
        if (buf.length < end + 4 + len) return;
        const msg = JSON.parse(buf.slice(end + 4, end + 4 + len).toString());
        buf = buf.slice(end + 4 + len);
        if (msg.method === 'initialize') {
          const body = JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: {
            capabilities: { experimental: { toycoder: { protocolVersion: 99 } } }, serverInfo: { name: 'old' } } });
          process.stdout.write('Content-Length: ' + Buffer.byteLength(body) + '\\r\\n\\r\\n' + body);
        }
      }
    });`;
  const shown: Array<[number, string]> = [];
  const handlers = {
    update() {}, requestPermission: async () => ({ decision: 'reject' as const }), askUser: async () => ({ cancelled: true as const }),
    showMessage: (type: number, message: string) => { shown.push([type, message]); },
  };
  const client = await DaemonClient.start({ command: [process.execPath, '-e', fake] }, handlers);
  try {
    assert.equal(shown.length, 1);
    assert.equal(shown[0][0], 2); // a warning the person sees
    assert.match(shown[0][1], /protocol version 99, this extension 1: they do not match/);
  } finally {
    await client.dispose();
  }
});
