// This chat's approvals, kept live: the loaded ones, then every change from GET /api/chat/{id}/events.
// The same events say when the server starts a reply on its own (a browser call that got no result in
// time): `onReply` lets the page follow it.
import { useCallback, useEffect, useRef, useState } from "react";
import type { Approval } from "../shared/api";
import { withApproval } from "../shared/approvalMap";

export function useChatApprovals(
  chatId: string,
  initial: Approval[],
  onReply: () => void,
): [ReadonlyMap<string, Approval>, (approval: Approval) => void] {
  const replied = useRef(onReply);
  replied.current = onReply;
  const [approvals, setApprovals] = useState<ReadonlyMap<string, Approval>>(
    () => new Map(initial.map((approval) => [approval.id, approval])),
  );
  const upsert = useCallback((approval: Approval) => setApprovals((known) => withApproval(known, approval)), []);
  useEffect(() => {
    const events = new EventSource(`/api/chat/${encodeURIComponent(chatId)}/events`);
    events.addEventListener("approval", (event) => upsert(JSON.parse(event.data) as Approval));
    events.addEventListener("reply", () => replied.current());
    return () => events.close();
  }, [chatId, upsert]);
  return [approvals, upsert];
}
