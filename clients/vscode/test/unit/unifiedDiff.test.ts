import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyUnifiedDiff, diffIsNewFile } from '../../src/unifiedDiff';

// Diffs below are what the daemon sends (Python difflib.unified_diff, "\ No newline" marked).

test('modifies lines in the middle, keeping the rest', () => {
  const before = 'a\nb\nc\nd\ne\nf\ng\nh\n';
  const diff = '--- a/x.txt\n+++ b/x.txt\n@@ -3,3 +3,4 @@\n c\n-d\n+D\n+D2\n e\n';
  assert.equal(applyUnifiedDiff(before, diff), 'a\nb\nc\nD\nD2\ne\nf\ng\nh\n');
});

test('several hunks', () => {
  const before = Array.from({ length: 20 }, (_, i) => `line ${i + 1}`).join('\n') + '\n';
  const diff = '--- a/f\n+++ b/f\n@@ -1,4 +1,4 @@\n-line 1\n+LINE 1\n line 2\n line 3\n line 4\n'
    + '@@ -17,4 +17,3 @@\n line 17\n line 18\n-line 19\n line 20\n';
  const after = applyUnifiedDiff(before, diff)!;
  assert.ok(after.startsWith('LINE 1\nline 2\n'));
  assert.ok(after.endsWith('line 18\nline 20\n'));
  assert.ok(!after.includes('line 19'));
});

test('a new file from /dev/null', () => {
  const diff = '--- /dev/null\n+++ b/notes/new.txt\n@@ -0,0 +1,2 @@\n+hi\n+there\n';
  assert.equal(diffIsNewFile(diff), true);
  assert.equal(applyUnifiedDiff('', diff), 'hi\nthere\n');
});

test('no newline at end of file, on either side', () => {
  const added = '--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+1\n\\ No newline at end of file\n';
  assert.equal(applyUnifiedDiff('', added), '1');
  const fixed = '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+x\n';
  assert.equal(applyUnifiedDiff('x', fixed), 'x\n');
  const replaced = '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n';
  assert.equal(applyUnifiedDiff('a\nb', replaced), 'a\nc');
  assert.equal(diffIsNewFile(fixed), false);
});

test('CRLF files keep their line endings', () => {
  const diff = '--- a/w.txt\r\n+++ b/w.txt\r\n@@ -1,2 +1,2 @@\r\n one\r\n-two\r\n+TWO\r\n';
  assert.equal(applyUnifiedDiff('one\r\ntwo\r\n', diff), 'one\r\nTWO\r\n');
});

test('a diff that does not match the current text is refused', () => {
  const diff = '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n';
  assert.equal(applyUnifiedDiff('a\nCHANGED\n', diff), undefined);
  assert.equal(applyUnifiedDiff('a\n', diff), undefined);
  assert.equal(applyUnifiedDiff('a\nb\n', 'not a diff'), undefined);
  assert.equal(applyUnifiedDiff('a\nb\n', '@@ -1,2 +1,2 @@\n a\ngarbage\n'), undefined);
});

test('an empty file deleted to nothing and pure insertions after a line', () => {
  const insert = '--- a/x\n+++ b/x\n@@ -1,0 +2 @@\n+inserted\n';
  assert.equal(applyUnifiedDiff('first\nlast\n', insert), 'first\ninserted\nlast\n');
  const clear = '--- a/x\n+++ b/x\n@@ -1,2 +0,0 @@\n-a\n-b\n';
  assert.equal(applyUnifiedDiff('a\nb\n', clear), '');
});
