// Deciding one of this chat's approvals on the server (POST /api/chat/{id}/approvals/{approval_id}), as the
// page's principal: blocking waits, "remember for this chat" and votes toward a quorum go this way.
import { ApiError, postJson, type Approval } from "../shared/api";

export interface ChatDecision {
  approved: boolean;
  reason: string;
  remember: "once" | "session";
}

/** The approval as it stands after this page's decision: decided by it, still pending when it was one vote
 * of several, or decided by whoever was quicker (a 409 that names the winner). A refusal that leaves it
 * pending (403: the rule does not let this page decide; 409: it approved already) throws the server's
 * message. Every answer is handed to `seen` first, so the card shows the approval as the server has it. */
export async function decideInChat(
  chatId: string,
  approvalId: string,
  decision: ChatDecision,
  seen: (approval: Approval) => void,
): Promise<Approval> {
  const url = `/api/chat/${encodeURIComponent(chatId)}/approvals/${encodeURIComponent(approvalId)}`;
  try {
    const decided = await postJson<Approval>(url, decision);
    seen(decided);
    return decided;
  } catch (problem) {
    if (!(problem instanceof ApiError && problem.approval)) throw problem;
    seen(problem.approval);
    if (problem.approval.state === "pending") throw problem;
    return problem.approval;
  }
}
