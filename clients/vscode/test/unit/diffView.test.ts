import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { closeProposalTabs, ProposalProvider, proposalUriFor, showProposedDiff } from '../../src/diffView';
import { TabInputText, TabInputTextDiff, Uri, calls, openTabs, resetStub, virtualDocs } from '../../stubs/vscode';

beforeEach(() => resetStub());

const root = Uri.file('/ws') as unknown as vscode.Uri;

test('the diff editor shows the current file against the proposed content', async () => {
  virtualDocs.set('file:///ws/src/app.py', 'def add(a, b):\n    return a + b\n');
  const provider = new ProposalProvider();
  const diff = '--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n';
  const shown = await showProposedDiff(provider, root, { path: 'src/app.py', diff });
  const [, args] = calls.find(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff')!;
  const [, left, right, title] = args as [string, vscode.Uri, vscode.Uri, string];
  assert.equal(shown.shown, 'diff');
  assert.deepEqual(shown.uris, [right], 'the proposal document is the tab to close later');
  assert.equal(left.toString(), 'file:///ws/src/app.py');
  assert.equal(right.scheme, 'toycoder-proposal');
  assert.equal(right.path, '/src/app.py');
  assert.equal(provider.provideTextDocumentContent(right), 'def add(a, b):\n    return b + a\n');
  assert.match(title, /src\/app\.py/);
});

test('a new file is compared with an empty document', async () => {
  const provider = new ProposalProvider();
  const shown = await showProposedDiff(provider, root, { path: 'new.txt', diff: '--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n' });
  const [, args] = calls.find(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff')!;
  const [, left, right] = args as [string, vscode.Uri, vscode.Uri];
  assert.deepEqual(shown.uris, [left, right]);
  assert.equal(left.scheme, 'toycoder-proposal');
  assert.equal(provider.provideTextDocumentContent(left), '');
  assert.equal(provider.provideTextDocumentContent(right), 'hello\n');
});

test('a diff that does not apply is shown as text', async () => {
  virtualDocs.set('file:///ws/a.txt', 'changed meanwhile\n');
  const provider = new ProposalProvider();
  const diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-original\n+proposed\n';
  // the stub opens our virtual documents through the provider
  (vscode.workspace as any).openTextDocument = async (uri: vscode.Uri) => {
    calls.push(['workspace.openTextDocument', [uri]]);
    const text = uri.scheme === 'toycoder-proposal' ? provider.provideTextDocumentContent(uri) : virtualDocs.get(uri.toString());
    return { uri, getText: () => text };
  };
  const shown = await showProposedDiff(provider, root, { path: 'a.txt', diff });
  assert.equal(shown.shown, 'text');
  const [, [doc]] = calls.find(([n]) => n === 'window.showTextDocument')! as [string, [{ uri: vscode.Uri; getText(): string }]];
  assert.equal(doc.uri.path, '/a.txt.diff');
  assert.equal(doc.getText(), diff);
  assert.equal(calls.some(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff'), false);
});

test('a decided proposal\'s tabs close (diff or text); other tabs stay', async () => {
  const provider = new ProposalProvider();
  const proposal = provider.add('src/app.py', 'new text') as unknown as Uri;
  const asText = provider.add('b.py.diff', '+x') as unknown as Uri;
  const mine = { label: 'src/app.py ↔ proposed by ToyCoder', input: new TabInputTextDiff(Uri.file('/ws/src/app.py'), proposal) };
  const text = { label: 'b.py.diff', input: new TabInputText(asText) };
  const other = { label: 'app.py', input: new TabInputText(Uri.file('/ws/src/app.py')) };
  const unrelatedDiff = { label: 'git', input: new TabInputTextDiff(Uri.file('/ws/a'), Uri.file('/ws/b')) };
  openTabs.push(other, mine, unrelatedDiff, text);
  await closeProposalTabs([proposal.toString(), asText.toString()]);
  assert.deepEqual(openTabs, [other, unrelatedDiff]);
  await closeProposalTabs([]);
  assert.equal(calls.filter(([n]) => n === 'window.tabGroups.close').length, 1, 'nothing to close: no call');
  provider.forget(proposal as unknown as vscode.Uri);
  assert.equal(provider.provideTextDocumentContent(proposal as unknown as vscode.Uri), '');
});

test('Accept / Reject find their proposal from the editor\'s resource or the active tab', () => {
  const provider = new ProposalProvider();
  const proposal = provider.add('src/app.py', 'x') as unknown as Uri;
  assert.equal(proposalUriFor(proposal), proposal.toString());
  assert.equal(proposalUriFor(Uri.file('/ws/src/app.py')), undefined, 'a real file is no proposal');
  openTabs.push({ label: 'diff', input: new TabInputTextDiff(Uri.file('/ws/src/app.py'), proposal) });
  assert.equal(proposalUriFor(undefined), proposal.toString());
  openTabs.push({ label: 'app.py', input: new TabInputText(Uri.file('/ws/src/app.py')) });
  assert.equal(proposalUriFor(undefined), undefined);
});
