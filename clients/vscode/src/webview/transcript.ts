/**
 * A loaded session's transcript as turns: each user entry starts one, the entries after it fill
 * it, and it ends as it did live (the stop reason and usage the daemon stored on the user entry); the
 * session's plan, last, shows as the plan card in the last turn.
 */

import type { TranscriptEntry } from '../shared/protocol';
import type { TurnView } from './turnView';

export function renderTranscript(entries: TranscriptEntry[], start: (prompt: string | null) => TurnView): TurnView[] {
  const turns: TurnView[] = [];
  let user: TranscriptEntry | null = null;
  let interrupted = false;
  const end = () => {
    if (turns.length) turns[turns.length - 1].restoredEnd(user?.stopReason, user?.usage, interrupted);
  };
  const current = () => turns[turns.length - 1] ?? turns[turns.push(start(null)) - 1];
  for (const entry of entries) {
    if (entry.role === 'user') {
      end();
      turns.push(start(entry.text));
      if (entry.context?.length) turns[turns.length - 1].chips(entry.context.map((c) => c.label));
      user = entry;
      interrupted = false;
    } else if (entry.role === 'assistant') {
      current().transcriptAssistant(entry.text);
      interrupted ||= entry.interrupted === true;
    } else if (entry.role === 'tool_call') {
      current().transcriptToolCall(entry);
    } else if (entry.role === 'tool') {
      current().transcriptToolResult(entry);
    } else if (entry.role === 'compaction') {
      current().notice('earlier turns summarised for the model', 'compaction'); // the turns above stay whole
    } else if (entry.role === 'plan' && entry.entries) {
      current().plan(entry.entries); // the session's plan as the history ends (last): its card again
    }
  }
  end();
  return turns;
}
