/**
 * The chat view inside the webview: renders what the host relays from the daemon, and posts the
 * person's input back. No agent logic: prompts (slash commands included) go out as typed.
 */

import type MarkdownIt from 'markdown-it';
import type { ToHost, ToWebview } from '../shared/messages';
import type { CommandInfo, MentionItem, PromptResult, TranscriptEntry, UpdateParams } from '../shared/protocol';
import { h } from './dom';
import { createMarkdown, createPromptMarkdown } from './markdown';
import { permissionCard, recordDecision } from './permissionCard';
import { pinPlan } from './planCard';
import { renderTranscript } from './transcript';
import { formatFooter, formatUsage, Segment, TurnView } from './turnView';

export class ChatView {
  private readonly md: MarkdownIt = createMarkdown();
  private readonly promptMd: MarkdownIt = createPromptMarkdown();
  private readonly conversation: HTMLElement;
  private readonly prompt: HTMLTextAreaElement;
  private readonly sendButton: HTMLButtonElement;
  private readonly stopButton: HTMLButtonElement;
  private readonly status: HTMLElement;
  /** The editor whose turn is shown live here (turn_elsewhere), while it runs. */
  private elsewhereClient: string | null = null;
  private readonly banner: HTMLElement;
  private readonly usageEl: HTMLElement;
  private readonly completions: HTMLUListElement;
  private readonly headerTitle: HTMLElement;
  private readonly headerMode: HTMLButtonElement;
  private readonly pinnedPlan: HTMLDetailsElement;
  /** The prompt of the turn being shown: what Retry sends again. */
  private lastPrompt: string | null = null;
  private readonly chipsEl: HTMLElement;
  private commands: CommandInfo[] = [];
  private matches: CommandInfo[] = [];
  /** `@` completion: the mention being typed (its start in the prompt) and the daemon's items for it. */
  private mention: { start: number; prefix: string } | null = null;
  private mentionItems: MentionItem[] = [];
  private selected = 0;
  private turn: TurnView | null = null;
  private running = false;
  private dirty = new Set<Segment>();
  private renderScheduled = false;
  /** A card the host asked to show before it arrived (a webview that was just created). */
  private showWhenArrives: string | null = null;

  constructor(private readonly post: (message: ToHost) => void) {
    this.conversation = document.getElementById('conversation')!;
    this.prompt = document.getElementById('prompt') as HTMLTextAreaElement;
    this.sendButton = document.getElementById('send') as HTMLButtonElement;
    this.stopButton = document.getElementById('stop') as HTMLButtonElement;
    this.status = document.getElementById('status')!;
    this.banner = document.getElementById('banner')!;
    this.usageEl = document.getElementById('usage')!;
    this.completions = document.getElementById('completions') as HTMLUListElement;
    this.headerTitle = document.getElementById('header-title')!;
    this.headerMode = document.getElementById('header-mode') as HTMLButtonElement;
    this.pinnedPlan = document.getElementById('pinned-plan') as HTMLDetailsElement;
    this.headerMode.addEventListener('click', () => this.post({ type: 'pickMode' }));
    this.chipsEl = document.getElementById('chips')!;
    this.prompt.addEventListener('paste', (e) => this.takeImages(e.clipboardData?.files, e));
    this.prompt.addEventListener('dragover', (e) => e.preventDefault());
    this.prompt.addEventListener('drop', (e) => this.takeImages(e.dataTransfer?.files, e));

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
      case 'header':
        this.headerTitle.textContent = message.title || 'New conversation';
        this.headerTitle.title = message.title;
        this.headerMode.textContent = message.mode || 'Mode';
        break;
      case 'commands':
        this.commands = message.commands;
        break;
      case 'chips':
        this.showChips(message.labels);
        break;
      case 'mentionItems':
        if (this.mention?.prefix === message.prefix) this.showMentions(message.items);
        break;
      case 'transcript':
        this.showTranscript(message.entries);
        break;
      case 'turnStarted':
        this.startTurn(message.text);
        break;
      case 'elsewhere':
        this.elsewhere(message.client, message.running, message.prompt);
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
        this.failed(this.currentTurn().notice(message.message, 'error'));
        this.setRunning(false);
        this.turn?.finish();
        this.turn = null;
        break;
      case 'notice':
        this.appendToConversation(h('div', `notice ${message.level}`, message.text));
        break;
      case 'focusInput':
        if (message.text !== undefined) this.prompt.value = message.text;
        this.prompt.focus();
        break;
      case 'permission': {
        if (this.reviewCard(message.id)) break;
        document.getElementById('empty')?.remove();
        const card = permissionCard(message.id, message.params, this.post);
        this.currentTurn().permission(card, message.params.toolCallId);
        // another editor's call: asked here too, the first answer (anywhere) decides
        if (this.elsewhereClient) this.status.textContent = `Waiting for approval in ${this.elsewhereClient}`;
        card.scrollIntoView({ block: 'nearest' }); // it waits for the person: show it
        if (this.showWhenArrives === message.id) {
          this.showWhenArrives = null;
          card.focus();
        }
        break;
      }
      case 'permissionDecided': {
        const card = this.reviewCard(message.id);
        if (card) recordDecision(card, message.outcome, message.source, message.by);
        if (this.elsewhereClient) this.status.textContent = `Running in ${this.elsewhereClient}`;
        break;
      }
      case 'showPermission': {
        const card = this.reviewCard(message.id);
        if (!card) {
          this.showWhenArrives = message.id;
          break;
        }
        card.scrollIntoView({ block: 'nearest' });
        card.focus();
        break;
      }
    }
  }

  private reviewCard(id: string): HTMLElement | null {
    return this.conversation.querySelector<HTMLElement>(`[data-review-id="${CSS.escape(id)}"]`);
  }

  private daemonState(state: 'starting' | 'ready' | 'exited', message?: string): void {
    // on the body too: the banner starts hidden, so only this says the panel has heard the daemon is up
    document.body.dataset.daemon = state;
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

  /** A failed turn's error notice offers Retry: the same prompt again, through the prompt request. */
  private failed(notice: HTMLElement): void {
    const text = this.lastPrompt;
    if (text === null) return;
    const retry = h('button', 'retry', 'Retry');
    retry.type = 'button';
    retry.title = 'Send the same prompt again';
    retry.addEventListener('click', () => {
      if (this.running) return;
      retry.disabled = true;
      this.post({ type: 'prompt', text });
    });
    notice.after(retry); // beside the notice, whose text stays the error's
  }

  /** Another editor's turn in this session: shown as a turn, its updates streaming in, "Running in <client>". */
  private elsewhere(client: string, running: boolean, prompt?: string): void {
    if (this.running) return; // our own turn: the session is locked, another cannot run meanwhile
    this.turn?.finish();
    this.turn = null;
    document.body.classList.toggle('elsewhere', running);
    this.elsewhereClient = running ? client : null;
    this.status.textContent = running ? `Running in ${client}` : '';
    if (!running) {
      this.unpinDonePlan();
      return;
    }
    this.turn = new TurnView(this, prompt ?? null);
    this.appendToConversation(this.turn.el);
    this.scrollToBottom();
  }

  private startTurn(text: string): void {
    this.lastPrompt = text;
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
      case 'mcp_wait':
        turn.mcpWait(u);
        break;
      case 'hook':
        turn.hook(u, parent);
        break;
      case 'compaction':
        turn.notice(`Context compacted (${u.strategy}): ${u.before} → ${u.after} messages`, 'compaction', parent);
        break;
      case 'plan':
        turn.plan(u.entries);
        if (!parent) pinPlan(this.pinnedPlan, u.entries);
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
      case 'error': {
        const notice = turn.notice(result.text || 'The turn failed.', 'error');
        this.failed(notice);
        break;
      }
      default:
        if (result.text) turn.notice(result.text, result.stopReason);
    }
    if (result.stopReason !== 'command') {
      turn.usage(result.usage, result.stopReason);
      this.usageEl.textContent = formatFooter(result.usage, result.stopReason);
    }
    turn.finish();
    this.turn = null;
    this.setRunning(false);
    this.unpinDonePlan();
    this.flushRender();
    this.scrollToBottom();
  }

  /** A plan whose steps are all done needs no pin once its turn is over (its card stays in the turn). */
  private unpinDonePlan(): void {
    if (this.pinnedPlan.dataset.done === 'true') this.pinnedPlan.hidden = true;
  }

  private showTranscript(entries: TranscriptEntry[]): void {
    this.turn = null;
    this.setRunning(false);
    this.dirty.clear();
    this.conversation.replaceChildren();
    this.usageEl.textContent = '';
    this.lastPrompt = [...entries].reverse().find((e) => e.role === 'user')?.text ?? null;
    const plan = entries.find((e) => e.role === 'plan' && e.entries)?.entries;
    pinPlan(this.pinnedPlan, plan ?? []);
    this.unpinDonePlan();
    if (entries.length === 0) {
      const empty = h('div', 'empty');
      empty.id = 'empty';
      empty.append('Ask ToyCoder about this workspace. Type ', h('code', undefined, '/'), ' for commands.');
      this.conversation.append(empty);
      return;
    }
    const turns = renderTranscript(entries, (prompt) => {
      const turn = new TurnView(this, prompt);
      this.conversation.append(turn.el);
      return turn;
    });
    for (const turn of turns) turn.finish(); // a call without a result was cut off, as live
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

  renderPrompt(text: string): string {
    return this.promptMd.render(text);
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
    const before = value.slice(0, this.prompt.selectionStart ?? value.length);
    const at = /(?:^|\s)@(\S*)$/.exec(before);
    if (at) {
      const prefix = at[1];
      this.mention = { start: before.length - prefix.length - 1, prefix };
      this.post({ type: 'mentions', prefix });
      return;
    }
    this.mention = null;
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

  /** The next prompt's attachments, each with a × that leaves it out. */
  private showChips(labels: string[]): void {
    this.chipsEl.replaceChildren(...labels.map((label, index) => {
      const chip = h('span', 'chip', label);
      const remove = h('button', 'chip-remove', '×');
      remove.setAttribute('aria-label', `Remove ${label}`);
      remove.addEventListener('click', () => this.post({ type: 'removeChip', index }));
      chip.append(remove);
      return chip;
    }));
    this.chipsEl.hidden = labels.length === 0;
  }

  /** Images pasted or dropped into the prompt box go to the host as base64 (the daemon checks them). */
  private takeImages(files: FileList | undefined, e: Event): void {
    const images = [...(files ?? [])].filter((f) => f.type.startsWith('image/'));
    if (!images.length) return;
    e.preventDefault();
    for (const file of images) {
      const reader = new FileReader();
      reader.onload = () => {
        const url = String(reader.result);
        const data = url.slice(url.indexOf(',') + 1);
        this.post({ type: 'attachImage', name: file.name || 'image', image: { mimeType: file.type, data } });
      };
      reader.readAsDataURL(file);
    }
  }

  private showMentions(items: MentionItem[]): void {
    this.mentionItems = items;
    // the same list as the commands': a mention is an item with its label as usage, its kind as help
    this.matches = items.map((i) => ({ name: i.label, usage: `@${i.label}`, help: i.kind, aliases: [], source: 'mention' }));
    this.selected = 0;
    if (this.matches.length === 0) this.hideCompletions();
    else this.renderCompletions();
  }

  private acceptCompletion(): void {
    if (this.mention && this.mentionItems[this.selected]) {
      const { start, prefix } = this.mention;
      const label = this.mentionItems[this.selected].label;
      const value = this.prompt.value;
      const end = start + 1 + prefix.length;
      const text = `@${label}${label.endsWith('/') ? '' : ' '}`;
      this.prompt.value = value.slice(0, start) + text + value.slice(end);
      const cursor = start + text.length;
      this.prompt.setSelectionRange(cursor, cursor);
      this.hideCompletions();
      this.prompt.focus();
      if (label.endsWith('/')) this.updateCompletions(); // a folder: go on into it
      return;
    }
    const c = this.matches[this.selected];
    if (!c) return;
    this.prompt.value = `/${c.name} `;
    this.hideCompletions();
    this.prompt.focus();
  }

  private hideCompletions(): void {
    this.completions.hidden = true;
    this.matches = [];
    this.mentionItems = [];
  }
}
