import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { EXT_ROOT } from '../helpers/env';

const pkg = JSON.parse(readFileSync(join(EXT_ROOT, 'package.json'), 'utf8'));

test('a movable ToyCoder webview view in the secondary side bar, with a command to move it', () => {
  assert.deepEqual(Object.keys(pkg.contributes.viewsContainers), ['secondarySidebar']);
  assert.deepEqual(pkg.contributes.viewsContainers.secondarySidebar.map((c: { id: string }) => c.id), ['toycoder']);
  assert.ok(pkg.contributes.menus['view/title'].some((m: { command: string; when: string }) =>
    m.command === 'toycoder.moveView' && m.when === 'view == toycoder.chat'));
  const [view] = pkg.contributes.views.toycoder;
  assert.equal(view.type, 'webview');
  assert.equal(view.id, 'toycoder.chat');
  assert.equal(view.name, 'ToyCoder');
  assert.notEqual(view.canMove, false);
});

test('the commands, and activation on them or the view', () => {
  const titles = Object.fromEntries(pkg.contributes.commands.map((c: { command: string; title: string; category: string }) =>
    [c.command, `${c.category}: ${c.title}`]));
  assert.deepEqual(titles, {
    'toycoder.openChat': 'ToyCoder: Open Chat',
    'toycoder.moveView': 'ToyCoder: Move Chat View…',
    'toycoder.newSession': 'ToyCoder: New Session',
    'toycoder.switchSession': 'ToyCoder: Switch Session',
    'toycoder.cancel': 'ToyCoder: Cancel',
    'toycoder.askAboutSelection': 'ToyCoder: Ask About Selection',
    'toycoder.addSelection': 'ToyCoder: Add Selection to Chat',
    'toycoder.acceptProposal': 'ToyCoder: Accept',
    'toycoder.rejectProposal': 'ToyCoder: Reject',
    'toycoder.showPendingReview': 'ToyCoder: Show Pending Permission Request',
    'toycoder.setMode': 'ToyCoder: Set Mode…',
  });
  const viewTitle = pkg.contributes.menus['view/title'].find((m: { command: string }) => m.command === 'toycoder.setMode');
  assert.match(viewTitle.group, /^navigation/, 'the mode picker is a button of the view');
  for (const command of Object.keys(titles)) assert.ok(pkg.activationEvents.includes(`onCommand:${command}`), command);
  assert.ok(pkg.activationEvents.includes('onView:toycoder.chat'));
});

test('the settings', () => {
  const props = pkg.contributes.configuration.properties;
  assert.equal(props['toycoder.daemon.command'].type, 'array');
  assert.deepEqual(props['toycoder.daemon.command'].default, ['toycoder-daemon']);
  assert.equal(props['toycoder.configPath'].type, 'string');
  assert.deepEqual(props['toycoder.logLevel'].enum, ['DEBUG', 'INFO', 'WARNING', 'ERROR']);
  assert.deepEqual(props['toycoder.permission.style'].enum, ['inline', 'modal']);
  assert.equal(props['toycoder.permission.style'].default, 'inline', 'no modal by default');
});

test('Accept / Reject in the title bar of a pending proposal only; Ask About Selection not on proposals', () => {
  const menus = pkg.contributes.menus;
  const title = Object.fromEntries(menus['editor/title'].map((m: { command: string; when: string; group: string }) => [m.command, m]));
  for (const command of ['toycoder.acceptProposal', 'toycoder.rejectProposal']) {
    assert.equal(title[command].when, 'resourceScheme == toycoder-proposal && toycoder.reviewPending');
    assert.match(title[command].group, /^navigation/, 'shown as a button, not in the ... menu');
    assert.ok(pkg.contributes.commands.find((c: { command: string; icon?: string }) => c.command === command).icon);
  }
  const [ask] = menus['editor/context'];
  assert.match(ask.when, /resourceScheme != toycoder-proposal/);
});

test('packaging never prompts: license, repository, publisher, engine; vsce pinned', () => {
  assert.equal(pkg.license, 'MIT');
  assert.ok(pkg.repository?.url);
  assert.ok(pkg.publisher);
  assert.match(pkg.engines.vscode, /^\^1\.\d+\.0$/);
  assert.equal(pkg.devDependencies['@vscode/vsce'], '3.9.2');
  assert.equal(pkg.main, './out/extension.js');
});
