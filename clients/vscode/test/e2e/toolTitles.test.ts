/**
 * The titles a restored tool card rebuilds (src/webview/toolTitle.ts) equal the daemon's own: each
 * built-in tool's `describe_call`, run in the daemon's Python, for arguments that exercise the
 * defaults, clipping and whitespace rules. A daemon that changes a title fails this test.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { toolPermission, toolTitle } from '../../src/webview/toolTitle';
import { PYTHON, REPO_ROOT } from '../helpers/env';

const LONG = `pytest -q ${'tests/test_calc.py '.repeat(8)}`;
const SAMPLES: Array<[string, Record<string, unknown>]> = [
  ['read_file', { path: 'calc.py' }],
  ['read_file', { path: 'src/app.py', offset: 10, limit: 20 }],
  ['list_directory', {}],
  ['list_directory', { path: 'src' }],
  ['glob_search', { pattern: '**/*.py' }],
  ['grep_search', { pattern: 'def \\w+', path: 'src' }],
  ['write_file', { path: 'tests/test_calc.py', content: 'x' }],
  ['edit_file', { path: 'calc.py', old_string: 'a', new_string: 'b' }],
  ['run_command', { command: 'pytest   -q\n\ttests' }],
  ['run_command', { command: LONG }],
  ['ask_user', { question: `Which one? ${'really '.repeat(20)}`, options: ['a', 'b'] }],
];

const SCRIPT = `
import json, sys
from toycoder_daemon.tools.ask import ask_user
from toycoder_daemon.tools.files.edit import edit_file, write_file
from toycoder_daemon.tools.files.read import list_directory, read_file
from toycoder_daemon.tools.search.tools import glob_search, grep_search
from toycoder_daemon.tools.shell.run_command import run_command
tools = {t.name: t for t in (read_file, list_directory, glob_search, grep_search, write_file, edit_file, run_command, ask_user)}
out = [[tools[name].describe_call(args), tools[name].level] for name, args in json.load(sys.stdin)]
print(json.dumps(out))
`;

test('restored titles and levels equal what the daemon sends live', () => {
  const stdout = execFileSync(PYTHON, ['-c', SCRIPT], { input: JSON.stringify(SAMPLES), cwd: REPO_ROOT, encoding: 'utf8' });
  const daemon = JSON.parse(stdout) as Array<[string, string]>;
  assert.equal(daemon.length, SAMPLES.length);
  const client = SAMPLES.map(([name, args]) => [toolTitle(name, args), toolPermission(name)]);
  assert.deepEqual(client, daemon);
});

test('titles for tools the client knows by shape: sub-agents, MCP tools, anything else', () => {
  assert.equal(toolTitle('planner', { query: 'Add\n  subtract()', context: 'calc.py' }), 'planner: Add subtract()');
  assert.equal(toolTitle('mcp__docs__search', { q: 'x' }), 'mcp docs/search');
  assert.equal(toolTitle('custom_tool', { target: 'a.txt', n: 2 }), 'custom_tool a.txt');
  assert.equal(toolTitle('custom_tool', { n: 2 }), 'custom_tool');
  assert.equal(toolTitle('read_file', '{not json'), 'read_file', 'arguments the model sent as invalid JSON');
});
