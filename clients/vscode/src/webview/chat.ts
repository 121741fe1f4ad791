/**
 * The chat view inside the webview: renders what the host relays from the daemon, and posts the
 * person's input back. No agent logic: prompts (slash commands included) go out as typed.
 */

import type MarkdownIt from 'markdown-it';
import type { ToHost, ToWebview } from '../shared/messages';
import type { CommandInfo, PromptResult, TranscriptEntry, Update, UpdateParams, Usage } from '../shared/protocol';
import { createMarkdown } from './markdown';
import { permissionCard, recordDecision } from './permissionCard';

const MAX_SHOWN = 20000; // characters of a tool's arguments or output shown in its card

interface Segment {
  el: HTMLElement;
  raw: string;
}

interface Card {
  el: HTMLDetailsElement;
  status: HTMLElement;
  children: HTMLElement;
  output: HTMLElement;
  outputSection: HTMLElement;
}

function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string, text?: string): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined) el.textContent = text;
  return el;
}

function clip(text: string): string {
  return text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}\n… (${text.length - MAX_SHOWN} more characters)` : text;
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

export function formatUsage(u: Usage): string {
  return `${u.promptTokens.toLocaleString('en-US')} in · ${u.completionTokens.toLocaleString('en-US')} out tokens`;
}

/** One exchange: the prompt and everything the agent did for it. */
class TurnView {
  readonly el: HTMLElement;
  readonly body: HTMLElement;
  private readonly footer: HTMLElement;
  private readonly cards = new Map<string, Card>();
  private readonly trailing = new WeakMap<HTMLElement, Segment>();
  private readonly segments: Segment[] = [];

  constructor(private readonly chat: ChatView, prompt: string | null) {
    this.el = h('div', 'turn');
    if (prompt !== null) {
      const user = h('div', prompt.startsWith('/') ? 'user-message command' : 'user-message', prompt);
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

  notice(text: string, kind: string, parentToolCallId?: string): void {
    this.append(this.container(parentToolCallId), h('div', `notice ${kind}`, text));
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
    const card: Card = { el, status, children, output, outputSection };
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
  }

  private setStatus(card: Card, status: string): void {
    card.el.dataset.status = status;
    card.status.textContent = status;
  }

  usage(u: Usage): void {
    this.footer.textContent = formatUsage(u);
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

  transcriptToolCall(entry: TranscriptEntry): void {
    let args: unknown = entry.text;
    try {
      args = JSON.parse(entry.text);
    } catch {
      /* shown raw */
    }
    const name = entry.name ?? 'tool';
    const card = this.toolCall({ kind: 'tool_call', toolCallId: entry.toolCallId ?? `${name}-${Math.random()}`, name,
      title: name, arguments: args, permission: 'safe' });
    this.setStatus(card, 'done');
  }

  transcriptToolResult(entry: TranscriptEntry): void {
    const card = entry.toolCallId ? this.cards.get(entry.toolCallId) : undefined;
    if (!card) {
      this.notice(clip(entry.text), 'tool-orphan');
      return;
    }
    card.output.textContent = clip(entry.text);
    card.outputSection.hidden = false;
  }
}

export class ChatView {
  private readonly md: MarkdownIt = createMarkdown();
  private readonly conversation: HTMLElement;
  private readonly prompt: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly status: HTMLElement;
  private readonly banner: HTMLElement;
  private readonly usageEl: HTMLElement;
  private readonly completions: HTMLUListElement;
  private commands: CommandInfo[] = [];
  private matches: CommandInfo[] = [];
  private selected = 0;
  private turn: TurnView | null = null;
  private running = false;
  private dirty = new Set<Segment>();
  private renderScheduled = false;

  constructor(private readonly post: (message: ToHost) => void) {
    this.conversation = document.getElementById('conversation')!;
    this.prompt = document.getElementById('prompt') as HTMLTextAreaElement;
    this.sendButton = document.getElementById('send') as HTMLButtonElement;
    this.stopButton = document.getElementById('stop') as HTMLButtonElement;
    this.status = document.getElementById('status')!;
    this.banner = document.getElementById('banner')!;
    this.usageEl = document.getElementById('usage')!;
    this.completions = document.getElementById('completions') as HTMLUListElement;

    this.prompt.addEventListener('keydown', (e) => this.onKeyDown(e));
    this.prompt.addEventListener('input', () => this.updateCompletions());
    this.prompt.addEventListener('blur', () => setTimeout(() => this.hideCompletions(), 150));
    this.sendButton.addEventListener('click', () => this.send());
    this.stopButton.addEventListener('click', () => this.post({ type: 'cancel' }));
    this.conversation.addEventListener('click', (e) => {
      const link = (e.target as HTMLElement | null)?.closest?.('a');
      if (link) {
        e.preventDefault();
        const href = link.getAttribute('href');
        if (href) this.post({ type: 'openLink', href });
      }
    });
  }

  // ---- messages from the host ------------------------------------------------------------------

  handle(message: ToWebview): void {
    switch (message.type) {
      case 'daemon':
        this.daemonState(message.state, message.message);
        break;
      case 'commands':
        this.commands = message.commands;
        break;
      case 'transcript':
        this.showTranscript(message.entries);
        break;
      case 'turnStarted':
        this.startTurn(message.text);
        break;
      case 'update':
        this.update(message.params);
        break;
      case 'progress':
        this.status.textContent = message.message ?? '';
        break;
      case 'turnEnded':
        this.endTurn(message.result);
        break;
      case 'turnFailed':
        this.currentTurn().notice(message.message, 'error');
        this.setRunning(false);
        this.turn?.finish();
        this.turn = null;
        break;
      case 'notice': {
        const el = h('div', `notice ${message.level}`, message.text);
        this.appendToConversation(el);
        break;
      }
      case 'focusInput':
        if (message.text !== undefined) this.prompt.value = message.text;
        this.prompt.focus();
        break;
      case 'permission': {
        if (this.reviewCard(message.id)) break;
        document.getElementById('empty')?.remove();
        const card = permissionCard(message.id, message.params, this.post);
        this.currentTurn().permission(card, message.params.toolCallId);
        card.scrollIntoView({ block: 'nearest' }); // it waits for the person: show it
        break;
      }
      case 'permissionDecided': {
        const card = this.reviewCard(message.id);
        if (card) recordDecision(card, message.outcome, message.source);
        break;
      }
      case 'showPermission': {
        const card = this.reviewCard(message.id);
        card?.scrollIntoView({ block: 'nearest' });
        card?.focus();
        break;
      }
    }
  }

  private reviewCard(id: string): HTMLElement | null {
    return this.conversation.querySelector<HTMLElement>(`[data-review-id="${CSS.escape(id)}"]`);
  }

  private daemonState(state: 'starting' | 'ready' | 'exited', message?: string): void {
    this.banner.replaceChildren();
    if (state === 'exited') {
      this.banner.className = 'banner error';
      const restart = h('button', 'restart', 'Restart');
      restart.type = 'button';
      restart.addEventListener('click', () => this.post({ type: 'restart' }));
      this.banner.append(h('span', 'banner-text', message ?? 'The ToyCoder daemon exited.'), restart);
      this.banner.hidden = false;
      if (this.running) {
        this.turn?.finish();
        this.turn = null;
        this.setRunning(false);
      }
    } else if (state === 'starting') {
      this.banner.className = 'banner info';
      this.banner.append(h('span', 'banner-text', message ?? 'Starting the ToyCoder daemon…'));
      this.banner.hidden = false;
    } else {
      this.banner.hidden = true;
    }
  }

  private appendToConversation(el: HTMLElement): void {
    const stick = this.nearBottom();
    document.getElementById('empty')?.remove();
    this.conversation.append(el);
    if (stick) this.scrollToBottom();
  }

  private currentTurn(): TurnView {
    if (!this.turn) {
      this.turn = new TurnView(this, null);
      this.appendToConversation(this.turn.el);
    }
    return this.turn;
  }

  private startTurn(text: string): void {
    this.turn?.finish();
    this.turn = new TurnView(this, text);
    this.appendToConversation(this.turn.el);
    this.scrollToBottom();
    this.setRunning(true);
  }

  private update(params: UpdateParams): void {
    const turn = this.currentTurn();
    const u = params.update;
    const parent = params.parentToolCallId;
    const stick = this.nearBottom();
    switch (u.kind) {
      case 'text_delta':
        turn.appendText(u.text, parent);
        break;
      case 'tool_call':
        turn.toolCall(u, parent);
        break;
      case 'tool_result':
        turn.toolResult(u, parent);
        break;
      case 'usage':
        if (!parent) {
          turn.usage(u);
          this.usageEl.textContent = formatUsage(u);
        }
        break;
      case 'retry':
        turn.retry(u, parent);
        break;
      case 'compaction':
        turn.notice(`Context compacted (${u.strategy}): ${u.before} → ${u.after} messages`, 'compaction', parent);
        break;
    }
    if (stick) this.scrollToBottom();
  }

  private endTurn(result: PromptResult): void {
    const turn = this.currentTurn();
    switch (result.stopReason) {
      case 'command':
        turn.commandOutput(result.text);
        break;
      case 'end_turn':
        if (!turn.hasText() && result.text) turn.markdown(result.text);
        break;
      case 'cancelled':
        turn.notice('Stopped.', 'cancelled');
        break;
      default:
        if (result.text) turn.notice(result.text, result.stopReason);
    }
    if (result.stopReason !== 'command') {
      turn.usage(result.usage);
      this.usageEl.textContent = formatUsage(result.usage);
    }
    turn.finish();
    this.turn = null;
    this.setRunning(false);
    this.flushRender();
    this.scrollToBottom();
  }

  private showTranscript(entries: TranscriptEntry[]): void {
    this.turn = null;
    this.setRunning(false);
    this.dirty.clear();
    this.conversation.replaceChildren();
    this.usageEl.textContent = '';
    if (entries.length === 0) {
      const empty = h('div', 'empty');
      empty.id = 'empty';
      empty.append('Ask ToyCoder about this workspace. Type ');
      empty.append(h('code', undefined, '/'));
      empty.append(' for commands.');
      this.conversation.append(empty);
      return;
    }
    let turn: TurnView | null = null;
    const current = () => {
      if (!turn) {
        turn = new TurnView(this, null);
        this.conversation.append(turn.el);
      }
      return turn;
    };
    for (const entry of entries) {
      if (entry.role === 'user') {
        turn = new TurnView(this, entry.text);
        this.conversation.append(turn.el);
      } else if (entry.role === 'assistant') {
        if (entry.text) current().markdown(entry.text);
      } else if (entry.role === 'tool_call') {
        current().transcriptToolCall(entry);
      } else if (entry.role === 'tool') {
        current().transcriptToolResult(entry);
      }
    }
    this.flushRender();
    this.scrollToBottom();
  }

  private setRunning(running: boolean): void {
    this.running = running;
    this.stopButton.hidden = !running;
    this.sendButton.hidden = running;
    document.body.classList.toggle('running', running);
    if (!running) this.status.textContent = '';
  }

  // ---- Markdown rendering, batched per frame while text streams ----------------------------------

  scheduleRender(seg: Segment): void {
    this.dirty.add(seg);
    if (this.renderScheduled) return;
    this.renderScheduled = true;
    // rAF for smooth streaming; the timer covers a webview that is hidden (no frames)
    const run = () => this.flushRender();
    requestAnimationFrame(run);
    setTimeout(run, 50);
  }

  private flushRender(): void {
    if (!this.renderScheduled && this.dirty.size === 0) return;
    this.renderScheduled = false;
    const stick = this.nearBottom();
    for (const seg of this.dirty) seg.el.innerHTML = this.md.render(seg.raw);
    this.dirty.clear();
    if (stick) this.scrollToBottom();
  }

  private nearBottom(): boolean {
    const c = this.conversation;
    return c.scrollHeight - c.scrollTop - c.clientHeight < 40;
  }

  private scrollToBottom(): void {
    this.conversation.scrollTop = this.conversation.scrollHeight;
  }

  // ---- the prompt box ---------------------------------------------------------------------------

  private send(): void {
    const text = this.prompt.value.trim();
    if (!text || this.running) return;
    this.post({ type: 'prompt', text });
    this.prompt.value = '';
    this.hideCompletions();
  }

  private onKeyDown(e: KeyboardEvent): void {
    if (e.isComposing) return;
    const open = !this.completions.hidden && this.matches.length > 0;
    if (open && (e.key === 'ArrowDown' || e.key === 'ArrowUp')) {
      e.preventDefault();
      const n = this.matches.length;
      this.selected = (this.selected + (e.key === 'ArrowDown' ? 1 : n - 1)) % n;
      this.renderCompletions();
      return;
    }
    if (open && e.key === 'Escape') {
      e.preventDefault();
      this.hideCompletions();
      return;
    }
    if (open && e.key === 'Tab') {
      e.preventDefault();
      this.acceptCompletion();
      return;
    }
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      const typed = this.prompt.value.trim();
      if (open && typed !== `/${this.matches[this.selected].name}`) {
        this.acceptCompletion();
      } else {
        this.send();
      }
    }
  }

  private updateCompletions(): void {
    const value = this.prompt.value;
    if (!/^\/\S*$/.test(value) || this.commands.length === 0) {
      this.hideCompletions();
      return;
    }
    const word = value.slice(1).toLowerCase();
    this.matches = this.commands.filter((c) =>
      c.name.toLowerCase().startsWith(word) || c.aliases.some((a) => a.toLowerCase().startsWith(word)));
    this.selected = 0;
    if (this.matches.length === 0) {
      this.hideCompletions();
      return;
    }
    this.renderCompletions();
  }

  private renderCompletions(): void {
    this.completions.replaceChildren(...this.matches.map((c, i) => {
      const li = h('li', i === this.selected ? 'completion selected' : 'completion');
      li.setAttribute('role', 'option');
      li.setAttribute('aria-selected', String(i === this.selected));
      li.append(h('span', 'completion-usage', c.usage || `/${c.name}`), h('span', 'completion-help', c.help));
      li.addEventListener('mousedown', (e) => {
        e.preventDefault();
        this.selected = i;
        this.acceptCompletion();
      });
      return li;
    }));
    this.completions.hidden = false;
    this.completions.querySelector('.selected')?.scrollIntoView({ block: 'nearest' });
  }

  private acceptCompletion(): void {
    const c = this.matches[this.selected];
    if (!c) return;
    this.prompt.value = `/${c.name} `;
    this.hideCompletions();
    this.prompt.focus();
  }

  private hideCompletions(): void {
    this.completions.hidden = true;
    this.matches = [];
  }
}
