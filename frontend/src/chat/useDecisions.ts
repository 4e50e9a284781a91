// Deciding an approval from its card. Each transport answers it in its own way (useDeferredChat,
// useBlockingChat, useLiveChat); what they share is here: the server decides first when it must, and the page
// keeps which approvals it answered, to tell when another channel got there first.
import { useState } from "react";
import type { Approval } from "../shared/api";
import { decideInChat } from "./decideInChat";
import type { ToolPart } from "./parts";
import type { ChatSession } from "./useChatSession";

export interface ApprovalResponse {
  id: string;
  approved: boolean;
  reason?: string;
}

export interface Answering {
  /** Whether the server's decision is the whole answer, given whether the server must decide first anyway
   * (`direct`: "remember" needs a session grant, and one vote of several may leave the approval pending for
   * the others). */
  serverAlone: (direct: boolean) => boolean;
  /** Answers the card in the chat, with the decision as it stands. */
  respond: (part: ToolPart, response: ApprovalResponse) => Promise<void>;
}

export interface Decisions {
  /** Approvals this page answered (approved or not). */
  answered: ReadonlySet<string>;
  decide: (part: ToolPart, approved: boolean, reason: string, remember: boolean) => Promise<void>;
}

export const approvedState = (approval: Approval | undefined) =>
  approval?.state === "approved" || approval?.state === "consumed";

export function useDecisions(
  { chatId, approvals, upsertApproval }: ChatSession,
  { serverAlone, respond }: Answering,
): Decisions {
  const [answered, setAnswered] = useState<ReadonlySet<string>>(new Set());

  async function decide(part: ToolPart, approved: boolean, reason: string, remember: boolean) {
    if (part.state !== "approval-requested") return;
    const id = part.approval.id;
    const unanswer = () => setAnswered((known) => new Set([...known].filter((other) => other !== id)));
    setAnswered((known) => new Set(known).add(id));
    const direct = remember || (approvals.get(id)?.quorum ?? 1) > 1;
    const alone = serverAlone(direct);
    if (alone || direct) {
      const body = { approved, reason, remember: remember ? ("session" as const) : ("once" as const) };
      // already decided elsewhere: the card says by whom, and the answer follows the winner
      const stands = await decideInChat(chatId, id, body, upsertApproval).catch((problem: unknown) => {
        unanswer(); // refused: the card still asks, or waits for the others
        throw problem;
      });
      if (stands.state === "pending") {
        unanswer(); // one vote of several: the others decide it, and the chat's events bring that here
        return;
      }
      approved = approvedState(stands);
      reason = stands.decision?.reason || stands.closed?.reason || "";
      if (alone) return;
    }
    await respond(part, { id, approved, reason: reason || undefined });
  }

  return { answered, decide };
}
