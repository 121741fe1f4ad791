/**
 * Permission requests reviewed in the chat (`toycoder.permission.style: inline`): each pending
 * toycoder/requestPermission is a card in the chat and, on demand, a diff editor whose title bar
 * has Accept / Reject. The first decision, from either place, answers the daemon; then the card
 * becomes a one-line record and the proposal's tabs close. A request the daemon withdraws
 * ($/cancelRequest: the turn ended or timed out) ends the same way, as `cancelled`; one another
 * editor decided first (permission_resolved) ends with that decision, saying where it was made.
 * Nothing here judges a request: a button is mapped to its decision string, that is all.
 */

import type { ReviewOutcome, ReviewSource, ToWebview } from './shared/messages';
import type { Decision, PermissionParams, PermissionResult } from './shared/protocol';

/** A diff preview as the daemon sends it (docs/protocol.md; `uri` is newer than our generated types). */
export interface DiffPreview {
  kind: 'diff';
  path: string;
  diff: string;
  uri?: string;
}

/** What a request handler receives: vscode's and vscode-jsonrpc's tokens both fit. */
export interface CancelToken {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => unknown): { dispose(): unknown };
}

export interface PendingReview {
  readonly id: string;
  readonly params: PermissionParams;
}

/** What the reviews need of the editor around them. */
export interface ReviewHost {
  /** To the chat webview. */
  post(message: ToWebview): void;
  /** Open the proposal's diff editor (without waiting for anything); the URIs of the documents it opened. */
  openDiff(preview: DiffPreview): Promise<string[]>;
  /** Close the tabs showing these documents. */
  closeTabs(uris: string[]): Promise<void>;
  /** The set of pending requests changed (badge, status bar, context key). */
  pendingChanged(pending: readonly PendingReview[]): void;
  log(line: string): void;
}

interface Pending extends PendingReview {
  /** The proposal documents opened for it (string URIs), closed when it is decided. */
  readonly uris: Set<string>;
  answer(result: PermissionResult): void;
}

/** How many withdrawn requests are remembered for a permission_resolved that comes after the withdrawal. */
const WITHDRAWN_KEPT = 32;

export class Reviews {
  private next = 1;
  private readonly pending = new Map<string, Pending>();
  /** Requests withdrawn ($/cancelRequest), card id by tool call id: vscode-jsonrpc acts on a cancel as
   *  soon as it reads it, ahead of the notifications read before it, so the permission_resolved that
   *  preceded the withdrawal on the wire is handled after it; the card then records that decision. */
  private readonly withdrawn = new Map<string, string>();

  constructor(private readonly host: ReviewHost) {}

  /** The daemon's request: shown as a card; resolves with the first decision (or reject when withdrawn). */
  request(params: PermissionParams, token: CancelToken): Promise<PermissionResult> {
    if (token.isCancellationRequested) return Promise.resolve({ decision: 'reject' });
    const id = `review-${this.next++}`;
    return new Promise<PermissionResult>((resolve) => {
      const sub = token.onCancellationRequested(() => this.finish(id, 'cancelled', 'chat'));
      this.pending.set(id, {
        id, params, uris: new Set(),
        answer: (result) => {
          sub.dispose();
          resolve(result);
        },
      });
      this.host.post({ type: 'permission', id, params });
      this.changed();
    });
  }

  /** A card's button. False when the request is no longer pending (decided elsewhere, withdrawn). */
  decide(id: string, decision: Decision, source: ReviewSource = 'chat'): boolean {
    return this.finish(id, decision, source);
  }

  /** permission_resolved: another editor that has the session open answered first. The request's
   *  card records that decision and who made it (the daemon withdraws the request itself). */
  resolved(toolCallId: string, decision: Decision, by: string): boolean {
    for (const p of this.pending.values()) {
      if (p.params.toolCallId === toolCallId) return this.finish(p.id, decision, 'chat', by);
    }
    const id = this.withdrawn.get(toolCallId);
    if (id === undefined) return false;
    this.withdrawn.delete(toolCallId);
    this.host.post({ type: 'permissionDecided', id, outcome: decision, source: 'chat', by });
    return true;
  }

  /** Accept / Reject in a proposal's title bar: the request whose documents include `uri`. */
  decideByUri(uri: string, decision: Decision): boolean {
    for (const p of this.pending.values()) {
      if (p.uris.has(uri)) return this.finish(p.id, decision, 'editor');
    }
    return false;
  }

  /** "Open diff": the request stays pending; its tabs are remembered so the decision closes them. */
  async openDiff(id: string): Promise<void> {
    const p = this.pending.get(id);
    const preview = p?.params.preview as DiffPreview | { kind: string } | undefined;
    if (!p || preview?.kind !== 'diff') return;
    const uris = await this.host.openDiff(preview as DiffPreview);
    if (this.pending.get(id) === p) {
      for (const u of uris) p.uris.add(u);
    } else {
      await this.host.closeTabs(uris); // decided while the editor opened
    }
  }

  /** A new webview: draw the pending cards again. */
  repost(): void {
    for (const p of this.pending.values()) this.host.post({ type: 'permission', id: p.id, params: p.params });
  }

  get pendingReviews(): PendingReview[] {
    return [...this.pending.values()].map(({ id, params }) => ({ id, params }));
  }

  /** The daemon is gone: nobody waits for these answers any more. */
  cancelAll(): void {
    for (const id of [...this.pending.keys()]) this.finish(id, 'cancelled', 'chat');
  }

  private finish(id: string, outcome: ReviewOutcome, source: ReviewSource, by?: string): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    if (outcome === 'cancelled') {
      this.withdrawn.set(p.params.toolCallId, id);
      for (const old of this.withdrawn.keys()) {
        if (this.withdrawn.size <= WITHDRAWN_KEPT) break;
        this.withdrawn.delete(old);
      }
    }
    p.answer({ decision: outcome === 'cancelled' ? 'reject' : outcome });
    this.host.post(by === undefined ? { type: 'permissionDecided', id, outcome, source }
      : { type: 'permissionDecided', id, outcome, source, by });
    if (p.uris.size) {
      this.host.closeTabs([...p.uris]).catch((e: Error) => this.host.log(`[toycoder-vscode] cannot close the diff: ${e.message}`));
    }
    this.changed();
    return true;
  }

  private changed(): void {
    this.host.pendingChanged(this.pendingReviews);
  }
}
