import assert from 'node:assert/strict';
import { beforeEach, test } from 'node:test';
import * as vscode from 'vscode';
import { ProposalProvider, showProposedDiff } from '../../src/diffView';
import { Uri, calls, resetStub, virtualDocs } from '../../stubs/vscode';

beforeEach(() => resetStub());

const root = Uri.file('/ws') as unknown as vscode.Uri;

test('the diff editor shows the current file against the proposed content', async () => {
  virtualDocs.set('file:///ws/src/app.py', 'def add(a, b):\n    return a + b\n');
  const provider = new ProposalProvider();
  const diff = '--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a + b\n+    return b + a\n';
  assert.equal(await showProposedDiff(provider, root, { path: 'src/app.py', diff }), 'diff');
  const [, args] = calls.find(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff')!;
  const [, left, right, title] = args as [string, vscode.Uri, vscode.Uri, string];
  assert.equal(left.toString(), 'file:///ws/src/app.py');
  assert.equal(right.scheme, 'toycoder-proposal');
  assert.equal(right.path, '/src/app.py');
  assert.equal(provider.provideTextDocumentContent(right), 'def add(a, b):\n    return b + a\n');
  assert.match(title, /src\/app\.py/);
});

test('a new file is compared with an empty document', async () => {
  const provider = new ProposalProvider();
  await showProposedDiff(provider, root, { path: 'new.txt', diff: '--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n' });
  const [, args] = calls.find(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff')!;
  const [, left, right] = args as [string, vscode.Uri, vscode.Uri];
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
  assert.equal(await showProposedDiff(provider, root, { path: 'a.txt', diff }), 'text');
  const [, [doc]] = calls.find(([n]) => n === 'window.showTextDocument')! as [string, [{ uri: vscode.Uri; getText(): string }]];
  assert.equal(doc.uri.path, '/a.txt.diff');
  assert.equal(doc.getText(), diff);
  assert.equal(calls.some(([n, a]) => n === 'commands.executeCommand' && a[0] === 'vscode.diff'), false);
});
