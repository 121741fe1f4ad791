/**
 * Apply a unified diff (the daemon's permission preview) to a file's current text, to get the
 * proposed text for VS Code's diff editor. Strict: every context and removed line must match, or
 * the result is undefined (the caller then shows the diff text itself).
 */

interface Hunk {
  oldStart: number;
  oldLines: number;
  lines: string[];
}

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

function parseHunks(diff: string): Hunk[] | undefined {
  const hunks: Hunk[] = [];
  let current: Hunk | undefined;
  const lines = diff.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    const header = HUNK_HEADER.exec(line);
    if (header) {
      current = { oldStart: Number(header[1]), oldLines: header[2] === undefined ? 1 : Number(header[2]), lines: [] };
      hunks.push(current);
    } else if (current && /^[ +\-\\]/.test(line)) {
      current.lines.push(line);
    } else if (current && line === '') {
      current.lines.push(' '); // some tools strip the space of an empty context line
    } else if (current) {
      return undefined; // garbage inside a hunk
    }
    // before the first hunk: ---/+++ headers, "diff --git", index lines: ignored
  }
  return hunks;
}

export function applyUnifiedDiff(original: string, diff: string): string | undefined {
  const hunks = parseHunks(diff);
  if (!hunks || hunks.length === 0) return undefined;
  // original lines with their endings
  const src = original === '' ? [] : original.match(/[^\n]*\n|[^\n]+$/g) ?? [];
  const content = (l: string) => l.replace(/\r?\n$/, '');
  const eol = (src.find((l) => l.endsWith('\n')) ?? '\n').endsWith('\r\n') ? '\r\n' : '\n';
  const out: string[] = [];
  let cursor = 0; // next unread original line
  for (const hunk of hunks) {
    // a hunk that removes nothing starts *after* line oldStart
    const start = hunk.oldLines === 0 ? hunk.oldStart : hunk.oldStart - 1;
    if (start < cursor || start > src.length) return undefined;
    out.push(...src.slice(cursor, start));
    let pos = start;
    let lastOut: 'new' | 'old' | undefined;
    for (const line of hunk.lines) {
      const tag = line[0];
      const text = line.slice(1);
      if (tag === ' ' || tag === '-') {
        if (pos >= src.length || content(src[pos]) !== text) return undefined;
        if (tag === ' ') {
          out.push(src[pos]);
          lastOut = 'new';
        } else {
          lastOut = 'old';
        }
        pos++;
      } else if (tag === '+') {
        out.push(text + eol);
        lastOut = 'new';
      } else if (tag === '\\') {
        // "\ No newline at end of file" refers to the line before it
        if (lastOut === 'new' && out.length) out[out.length - 1] = content(out[out.length - 1]);
      }
    }
    cursor = pos;
  }
  out.push(...src.slice(cursor));
  return out.join('');
}

/** True when the diff creates its file (`--- /dev/null`). */
export function diffIsNewFile(diff: string): boolean {
  return /^--- \/dev\/null\s*$/m.test(diff.split('\n@@')[0]);
}
