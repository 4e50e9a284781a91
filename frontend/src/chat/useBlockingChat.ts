// Blocking approvals over SSE: a reply that asks stays open, waiting on the server, so deciding there is the
// whole answer, and the stream carries the rest, decisions made elsewhere too. A card asking after its
// stream ended is answered as deferred, with the AI SDK's approval response. A stream cut while a card asks
// (its worker stopped or died) is followed again, on any worker, and the card is decided on the server
// meanwhile.
import { useEffect } from "react";
import type { WaitMode } from "../shared/api";
import type { ChatMode } from "./Chat";
import type { ChatSnapshot } from "./loadChat";
import { lastStepTools } from "./parts";
import { useDecisions } from "./useDecisions";
import { useSseChat } from "./useSseChat";

export function useBlockingChat(snapshot: ChatSnapshot, waitOverride: WaitMode | undefined): ChatMode {
  const session = useSseChat(snapshot, waitOverride);
  const decisions = useDecisions(session, {
    serverAlone: () => session.streaming || session.catchingUp,
    respond: async (_part, response) => session.addToolApprovalResponse(response),
  });
  const { status, messages, recover } = session;
  const cutWhileAsking =
    status === "error" && lastStepTools(messages).some((part) => part.state === "approval-requested");
  useEffect(() => {
    if (cutWhileAsking) void recover();
  }, [cutWhileAsking, recover]);
  return { session, decisions };
}
