// Deferred approvals over SSE: a reply that asks ends there, and the page's answer is the AI SDK's own
// approval response, sent with the next request. An approval decided elsewhere (the inbox, the CLI, a
// deadline) answers the card here too, so the reply goes on by itself; but while the page follows a cut
// blocking reply (see useChatSession's recover), the server alone decides, and continues that reply.
import { useEffect, useRef } from "react";
import type { WaitMode } from "../shared/api";
import type { ChatMode } from "./Chat";
import type { ChatSnapshot } from "./loadChat";
import { allTools } from "./parts";
import type { ChatSession } from "./useChatSession";
import { approvedState, useDecisions } from "./useDecisions";
import { useSseChat } from "./useSseChat";

export function useDeferredChat(snapshot: ChatSnapshot, waitOverride: WaitMode | undefined): ChatMode {
  const session = useSseChat(snapshot, waitOverride);
  const decisions = useDecisions(session, {
    serverAlone: () => session.catchingUp,
    respond: async (_part, response) => session.addToolApprovalResponse(response),
  });
  useDecidedElsewhere(session, decisions.answered);
  return { session, decisions };
}

function useDecidedElsewhere(
  { messages, approvals, addToolApprovalResponse, catchingUp }: ChatSession,
  answered: ReadonlySet<string>,
): void {
  const mirrored = useRef(new Set<string>());
  useEffect(() => {
    if (catchingUp) return;
    for (const part of allTools(messages)) {
      if (part.state !== "approval-requested") continue;
      const approval = approvals.get(part.approval.id);
      if (!approval || approval.state === "pending" || answered.has(approval.id)) continue;
      if (mirrored.current.has(approval.id)) continue;
      mirrored.current.add(approval.id);
      const reason = approval.decision?.reason || approval.closed?.reason || approval.state;
      void addToolApprovalResponse({ id: approval.id, approved: approvedState(approval), reason });
    }
  }, [messages, approvals, answered, addToolApprovalResponse, catchingUp]);
}
