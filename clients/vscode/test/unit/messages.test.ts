import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isToHost } from '../../src/shared/messages';

test('only well-formed webview messages reach the host', () => {
  assert.equal(isToHost({ type: 'ready' }), true);
  assert.equal(isToHost({ type: 'prompt', text: 'hi' }), true);
  assert.equal(isToHost({ type: 'cancel' }), true);
  assert.equal(isToHost({ type: 'pickMode' }), true);
  assert.equal(isToHost({ type: 'restart' }), true);
  assert.equal(isToHost({ type: 'openLink', href: 'https://x' }), true);
  assert.equal(isToHost({ type: 'prompt' }), false);
  assert.equal(isToHost({ type: 'prompt', text: 3 }), false);
  assert.equal(isToHost({ type: 'turnEnded' }), false, 'a host->webview type is not accepted from the webview');
  assert.equal(isToHost(null), false);
  assert.equal(isToHost('ready'), false);
});

test('permission card messages: a known decision and a request id', () => {
  assert.equal(isToHost({ type: 'permissionDecision', id: 'r1', decision: 'allow_once' }), true);
  assert.equal(isToHost({ type: 'permissionDecision', id: 'r1', decision: 'reject' }), true);
  assert.equal(isToHost({ type: 'permissionDecision', id: 'r1', decision: 'yes please' }), false);
  assert.equal(isToHost({ type: 'permissionDecision', decision: 'allow_once' }), false);
  assert.equal(isToHost({ type: 'openDiff', id: 'r1' }), true);
  assert.equal(isToHost({ type: 'openDiff' }), false);
  assert.equal(isToHost({ type: 'permissionDecided', id: 'r1', outcome: 'reject', source: 'chat' }), false);
});

test('changes card messages: a restore request with a turn id, an openFile with a uri', () => {
  assert.equal(isToHost({ type: 'restore', request: { turnId: 't1' } }), true);
  assert.equal(isToHost({ type: 'restore', request: { turnId: 't1', paths: ['a.py'], force: true } }), true);
  assert.equal(isToHost({ type: 'restore', request: { turnId: '' } }), false);
  assert.equal(isToHost({ type: 'restore', request: { turnId: 't1', paths: 'a.py' } }), false);
  assert.equal(isToHost({ type: 'restore', request: { turnId: 't1', force: 'yes' } }), false);
  assert.equal(isToHost({ type: 'restore' }), false);
  assert.equal(isToHost({ type: 'openFile', uri: 'file:///w/a.py' }), true);
  assert.equal(isToHost({ type: 'openFile' }), false);
  assert.equal(isToHost({ type: 'turnDiff', request: { turnId: 't1', path: 'a.py' } }), true);
  assert.equal(isToHost({ type: 'turnDiff', request: { turnId: 't1', path: '' } }), false);
  assert.equal(isToHost({ type: 'turnDiff', request: { turnId: '', path: 'a.py' } }), false);
  assert.equal(isToHost({ type: 'turnDiff', request: { turnId: 't1' } }), false);
  assert.equal(isToHost({ type: 'turnDiff' }), false);
  assert.equal(isToHost({ type: 'restoreResult', request: { turnId: 't1' }, result: { restored: [], conflicts: [] } }), false);
});

test('code block messages carry the code as text', () => {
  assert.equal(isToHost({ type: 'copyCode', text: 'print(1)\n' }), true);
  assert.equal(isToHost({ type: 'insertCode', text: '' }), true);
  assert.equal(isToHost({ type: 'copyCode' }), false);
  assert.equal(isToHost({ type: 'insertCode', text: ['x'] }), false);
});

test('context messages: a mention prefix, a chip index, an image with its type and data', () => {
  assert.equal(isToHost({ type: 'mentions', prefix: 'cal' }), true);
  assert.equal(isToHost({ type: 'mentions', prefix: '' }), true);
  assert.equal(isToHost({ type: 'mentions' }), false);
  assert.equal(isToHost({ type: 'removeChip', index: 0 }), true);
  assert.equal(isToHost({ type: 'removeChip', index: -1 }), false);
  assert.equal(isToHost({ type: 'removeChip', index: '0' }), false);
  assert.equal(isToHost({ type: 'attachImage', name: 'a.png', image: { mimeType: 'image/png', data: 'iVBO' } }), true);
  assert.equal(isToHost({ type: 'attachImage', name: 'a.png', image: { mimeType: 'image/png' } }), false);
  assert.equal(isToHost({ type: 'attachImage', name: 'a.png', image: null }), false);
  assert.equal(isToHost({ type: 'mentionItems', prefix: 'c', items: [] }), false, 'the host->webview answer');
});
