/**
 * One exchange in the chat: the prompt and everything the agent did for it (streamed Markdown,
 * tool cards with sub-agent activity nested in them, notices, permission cards, the usage footer).
 */

import type { Level, PlanEntryInfo, TranscriptEntry, Update, UsageInfo } from '../shared/protocol';
import { h } from './dom';
import { fillPlan, planCard } from './planCard';
import { toolPermission, toolTitle } from './toolTitle';

const MAX_SHOWN = 20000; // characters of a tool's arguments or output shown in its card
const INTERRUPTED_NOTE = '\n[interrupted by the user]'; // toycoder_daemon/agent/react.py

export interface Segment {
  el: HTMLElement;
  raw: string;
}

interface Card {
  el: HTMLDetailsElement;
  name: string;
  /** ask_user's question: its answer is shown under the card, in the transcript. */
  question?: string;
  status: HTMLElement;
  children: HTMLElement;
  output: HTMLElement;
  outputSection: HTMLElement;
}

function clip(text: string): string {
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}\n… (${text.length - MAX_SHOWN} more characters)` : text;
}

const ANSWERED = 'The user answered: '; // toycoder_daemon/tools/ask.py

/** The question of ask_user's arguments (an object, or its JSON). */
function askedQuestion(args: unknown): string {
  let value = args;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value);
    } catch {
      return '';
    }
  }
  const q = (value as { question?: unknown } | null)?.question;
  return typeof q === 'string' ? q : '';
}

function formatArguments(args: unknown): string {
  if (typeof args === 'string') {
    try {
      return JSON.stringify(JSON.parse(args), null, 2);
    } catch {
      return args;
    }
  }
  return JSON.stringify(args, null, 2) ?? '';
}

export function formatUsage(u: UsageInfo): string {
  return `${u.promptTokens.toLocaleString('en-US')} in · ${u.completionTokens.toLocaleString('en-US')} out tokens`;
}

/** A turn's footer: its tokens; a cancelled turn says so, without "0 in · 0 out" when nothing was counted. */
export function formatFooter(u: UsageInfo, stopReason: string): string {
  if (stopReason !== 'cancelled') return formatUsage(u);
  return u.promptTokens || u.completionTokens ? `Cancelled · ${formatUsage(u)}` : 'Cancelled';
}

/** Markdown is rendered in batches by the chat view. */
export interface Renderer {
  scheduleRender(seg: Segment): void;
  /** The person's prompt as HTML (Markdown, escaped like model text). */
  renderPrompt(text: string): string;
}

/** One exchange: the prompt and everything the agent did for it. */
export class TurnView {
  readonly el: HTMLElement;
  readonly body: HTMLElement;
  private readonly footer: HTMLElement;
  private readonly cards = new Map<string, Card>();
  private readonly trailing = new WeakMap<HTMLElement, Segment>();
  private readonly segments: Segment[] = [];
  private planEl: HTMLElement | null = null;
  private mcpWaitEl: HTMLElement | null = null;

  constructor(private readonly chat: Renderer, prompt: string | null) {
    this.el = h('div', 'turn');
    if (prompt !== null) {
      // a slash command stays as typed; a prompt is Markdown, like the reply
      const command = prompt.startsWith('/');
      const user = h('div', command ? 'user-message command' : 'user-message markdown', command ? prompt : undefined);
      if (!command) user.innerHTML = chat.renderPrompt(prompt).trim();
      this.el.append(user);
    }
    this.body = h('div', 'assistant');
    this.footer = h('div', 'turn-footer');
    this.el.append(this.body, this.footer);
  }

  /** The element updates with this parent tool call id go into. */
  private container(parentToolCallId?: string): HTMLElement {
    if (parentToolCallId) {
      const card = this.cards.get(parentToolCallId);
      if (card) {
        if (!card.el.classList.contains('has-children')) {
          card.el.classList.add('has-children');
          card.el.open = true; // sub-agent activity is shown while it runs
        }
        return card.children;
      }
    }
    return this.body;
  }

  private append(container: HTMLElement, child: HTMLElement): void {
    this.trailing.delete(container);
    container.append(child);
  }

  appendText(text: string, parentToolCallId?: string): void {
    const container = this.container(parentToolCallId);
    let seg = this.trailing.get(container);
    if (!seg) {
      seg = { el: h('div', 'markdown'), raw: '' };
      container.append(seg.el);
      this.trailing.set(container, seg);
      this.segments.push(seg);
    }
    seg.raw += text;
    this.chat.scheduleRender(seg);
  }

  /** The reply being retried is dropped: its partial text is the trailing segment of its container. */
  retry(update: Extract<Update, { kind: 'retry' }>, parentToolCallId?: string): void {
    const container = this.container(parentToolCallId);
    const seg = this.trailing.get(container);
    if (seg) {
      seg.el.remove();
      seg.raw = '';
      this.trailing.delete(container);
    }
    const delay = update.delaySeconds ? ` in ${update.delaySeconds.toFixed(1)}s` : '';
    this.notice(`Retrying (attempt ${update.attempt}${delay}): ${update.reason}`, 'retry', parentToolCallId);
  }

  /** The wait for MCP servers: one notice while they start, then saying which are ready and which failed. */
  mcpWait(update: Extract<Update, { kind: 'mcp_wait' }>): void {
    if (update.state === 'waiting') {
      this.mcpWaitEl = h('div', 'notice mcp-wait waiting', `Starting MCP servers: ${update.servers.join(', ')}…`);
      this.append(this.body, this.mcpWaitEl);
      return;
    }
    const el = this.mcpWaitEl;
    if (!el) return;
    this.mcpWaitEl = null;
    const failed = update.failed ?? [];
    const ready = update.servers.filter((s) => !failed.includes(s));
    const said = [ready.length ? `ready: ${ready.join(', ')}` : '', failed.length ? `failed: ${failed.join(', ')}` : ''];
    el.textContent = `MCP servers ${said.filter(Boolean).join('; ')}`;
    el.classList.remove('waiting');
    if (failed.length) el.classList.add('failed');
  }

  /** A hook's run: one line (event, command, outcome, time); its reason shown on a click. */
  hook(update: Extract<Update, { kind: 'hook' }>, parentToolCallId?: string): void {
    const el = h('details', `notice hook ${update.outcome}`);
    el.append(h('summary', '', `Hook ${update.event} \`${update.command}\` ${update.outcome} (${update.durationMs} ms)`));
    if (update.reason) el.append(h('pre', 'hook-reason', update.reason));
    this.append(this.container(parentToolCallId), el);
  }

  /** The plan card: where the first plan arrived, its list replaced by each later one. */
  plan(entries: PlanEntryInfo[]): void {
    if (!this.planEl) {
      this.planEl = planCard();
      this.append(this.body, this.planEl);
    }
    fillPlan(this.planEl, entries);
  }

  /** What was attached to the prompt (a resumed session's transcript), one chip each. */
  chips(labels: string[]): void {
    const row = h('div', 'chips');
    for (const label of labels) row.append(h('span', 'chip', label));
    this.append(this.container(), row);
  }

  notice(text: string, kind: string, parentToolCallId?: string): HTMLElement {
    const el = h('div', `notice ${kind}`, text);
    this.append(this.container(parentToolCallId), el);
    return el;
  }

  toolCall(update: Extract<Update, { kind: 'tool_call' }>, parentToolCallId?: string): Card {
    const el = h('details', 'tool-card') as HTMLDetailsElement;
    el.dataset.toolCallId = update.toolCallId;
    el.dataset.status = 'running';
    el.dataset.permission = update.permission;
    const summary = h('summary');
    const status = h('span', 'tool-status', 'running');
    summary.append(h('span', 'tool-icon'), h('span', 'tool-title', update.title || update.name), status);
    const children = h('div', 'tool-children');
    const argsSection = h('div', 'tool-section');
    argsSection.append(h('div', 'tool-label', 'Arguments'), h('pre', 'tool-args', clip(formatArguments(update.arguments))));
    const outputSection = h('div', 'tool-section');
    outputSection.hidden = true;
    const output = h('pre', 'tool-output');
    outputSection.append(h('div', 'tool-label', 'Output'), output);
    el.append(summary, argsSection, children, outputSection);
    const card: Card = { el, name: update.name, status, children, output, outputSection };
    if (update.name === 'ask_user') card.question = askedQuestion(update.arguments);
    this.cards.set(update.toolCallId, card);
    this.append(this.container(parentToolCallId), el);
    return card;
  }

  toolResult(update: Extract<Update, { kind: 'tool_result' }>, parentToolCallId?: string): void {
    const card = this.cards.get(update.toolCallId)
      ?? this.toolCall({ kind: 'tool_call', toolCallId: update.toolCallId, name: update.toolCallId, title: update.toolCallId,
        arguments: '', permission: 'safe' }, parentToolCallId);
    this.setStatus(card, update.status);
    card.output.textContent = clip(update.output);
    card.outputSection.hidden = false;
    this.showAnswer(card, update.output);
  }

  /** ask_user's question and the person's answer, in the transcript under its (collapsed) card. */
  private showAnswer(card: Card, output: string): void {
    if (card.name !== 'ask_user' || card.el.dataset.status !== 'completed') return;
    const answered = output.startsWith(ANSWERED);
    const box = h('div', answered ? 'ask-answer' : 'ask-answer unanswered');
    if (card.question) box.append(h('div', 'ask-question', card.question));
    box.append(h('div', 'ask-reply', answered ? output.slice(ANSWERED.length) : 'No answer'));
    const container = card.el.parentElement as HTMLElement;
    this.trailing.delete(container);
    card.el.after(box);
  }

  private setStatus(card: Card, status: string): void {
    card.el.dataset.status = status;
    card.status.textContent = status;
  }

  usage(u: UsageInfo, stopReason = 'end_turn'): void {
    this.footer.textContent = formatFooter(u, stopReason);
  }

  hasText(): boolean {
    return this.segments.some((s) => s.raw.trim() !== '' && this.body.contains(s.el) && s.el.parentElement === this.body);
  }

  markdown(text: string): void {
    const seg = { el: h('div', 'markdown'), raw: text };
    this.append(this.body, seg.el);
    this.segments.push(seg);
    this.chat.scheduleRender(seg);
  }

  /** A permission card goes right after its tool call's card (or at the end). */
  permission(card: HTMLElement, toolCallId: string): void {
    const call = this.cards.get(toolCallId);
    if (call) {
      const container = call.el.parentElement as HTMLElement;
      this.trailing.delete(container);
      call.el.after(card);
    } else {
      this.append(this.body, card);
    }
  }

  commandOutput(text: string): void {
    if (text) this.append(this.body, h('pre', 'command-output', text));
  }

  /** Cards still running when the turn ended did not finish. */
  finish(): void {
    for (const card of this.cards.values()) {
      if (card.el.dataset.status === 'running') this.setStatus(card, 'interrupted');
    }
  }

  /**
   * A stored reply. Session files written before the daemon stored an interrupted reply's flag end
   * such a reply with its note to the model: that note is not shown; the turn reads as it did live.
   * Newer ones store the text without it, flag it `interrupted`, and the turn's end (restoredEnd).
   */
  transcriptAssistant(text: string): void {
    const cut = text.endsWith(INTERRUPTED_NOTE);
    const shown = cut ? text.slice(0, -INTERRUPTED_NOTE.length) : text;
    if (shown) this.markdown(shown);
    if (cut) this.notice('Stopped.', 'cancelled');
  }

  /** A restored turn ends as it did live: "Stopped." after a cancel, then its footer (tokens). */
  restoredEnd(stopReason: string | undefined, usage: UsageInfo | undefined, interrupted: boolean): void {
    if (stopReason === 'cancelled' || interrupted) this.notice('Stopped.', 'cancelled');
    if (usage && stopReason && stopReason !== 'command') this.usage(usage, stopReason);
  }

  transcriptToolCall(entry: TranscriptEntry): void {
    let args: unknown = entry.text;
    try {
      args = JSON.parse(entry.text);
    } catch {
      /* shown raw */
    }
    const name = entry.name ?? 'tool';
    // `running` until its result entry says how it ended; finish() marks one without a result interrupted
    this.toolCall({ kind: 'tool_call', toolCallId: entry.toolCallId ?? `${name}-${Math.random()}`, name,
      title: toolTitle(name, args), arguments: args, permission: toolPermission(name) });
  }

  transcriptToolResult(entry: TranscriptEntry): void {
    const card = entry.toolCallId ? this.cards.get(entry.toolCallId) : undefined;
    if (!card) {
      this.notice(clip(entry.text), 'tool-orphan');
      return;
    }
    this.setStatus(card, entry.status ?? 'completed'); // older transcripts store no status for a success
    card.output.textContent = clip(entry.text);
    card.outputSection.hidden = false;
    this.showAnswer(card, entry.text);
  }
}
