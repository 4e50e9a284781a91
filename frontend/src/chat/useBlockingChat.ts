// Blocking approvals over SSE: a reply that asks stays open, waiting on the server, so deciding there is the
// whole answer, and the stream carries the rest, decisions made elsewhere too. A card asking after its
// stream ended is answered as deferred, with the AI SDK's approval response.
import type { WaitMode } from "../shared/api";
import type { ChatMode } from "./Chat";
import type { ChatSnapshot } from "./loadChat";
import { useDecisions } from "./useDecisions";
import { useSseChat } from "./useSseChat";

export function useBlockingChat(snapshot: ChatSnapshot, waitOverride: WaitMode | undefined): ChatMode {
  const session = useSseChat(snapshot, waitOverride);
  const decisions = useDecisions(session, {
    serverAlone: () => session.streaming,
    respond: async (_part, response) => session.addToolApprovalResponse(response),
  });
  return { session, decisions };
}
