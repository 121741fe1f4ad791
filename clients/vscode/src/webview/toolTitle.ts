/**
 * A restored tool card's title and permission level, rebuilt from the tool's name and arguments the
 * way the daemon titles a live `tool_call` (toycoder_daemon/tools/*: the `title=` of each tool, the
 * sub-agents' `name: query`, MCP's `mcp server/tool`, else `name first-string-argument`), so a
 * reloaded session shows the cards it showed live. The transcript carries no title of its own.
 */

import type { Level } from '../shared/protocol';

type Args = Record<string, unknown>;

const oneLine = (v: unknown): string => String(v ?? '').split(/\s+/).filter(Boolean).join(' ');

const TITLES: Record<string, (a: Args) => string> = {
  read_file: (a) => `read_file ${String(a.path ?? '')}`,
  list_directory: (a) => `list_directory ${String(a.path || '.')}`,
  write_file: (a) => `write_file ${String(a.path ?? '')}`,
  edit_file: (a) => `edit_file ${String(a.path ?? '')}`,
  glob_search: (a) => `glob_search ${String(a.pattern ?? '')}`,
  grep_search: (a) => `grep_search ${String(a.pattern ?? '')}`,
  ask_user: (a) => `ask_user ${String(a.question ?? '').slice(0, 80)}`,
  run_command: (a) => {
    const command = oneLine(a.command);
    return `run_command ${command.slice(0, 80)}${command.length > 80 ? '…' : ''}`;
  },
};

const LEVELS: Record<string, Level> = { write_file: 'sensitive', edit_file: 'sensitive', run_command: 'dangerous' };

export function toolTitle(name: string, args: unknown): string {
  if (!args || typeof args !== 'object' || Array.isArray(args)) return name; // invalid JSON: the call failed
  const a = args as Args;
  const known = TITLES[name];
  if (known) return known(a);
  const mcp = /^mcp__(.+?)__(.+)$/.exec(name);
  if (mcp) return `mcp ${mcp[1]}/${mcp[2]}`;
  // a sub-agent is a tool with `query` (and optional `context`) arguments
  const keys = Object.keys(a);
  if ('query' in a && keys.every((k) => k === 'query' || k === 'context')) return `${name}: ${oneLine(a.query).slice(0, 80)}`;
  const first = a[keys[0]];
  if (keys.length === 0) return name;
  return typeof first === 'string' ? `${name} ${first}`.trim() : name;
}

/** The level a live card carries in `data-permission` (MCP servers' own levels are not known here). */
export function toolPermission(name: string): Level {
  return LEVELS[name] ?? 'safe';
}
