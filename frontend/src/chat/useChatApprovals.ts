// This chat's approvals, kept live: the loaded ones, then every change the chat's events bring (see
// useChatEvents) or a decision made here returns.
import { useCallback, useState } from "react";
import type { Approval } from "../shared/api";
import { withApproval } from "../shared/approvalMap";

export function useChatApprovals(initial: Approval[]): [ReadonlyMap<string, Approval>, (approval: Approval) => void] {
  const [approvals, setApprovals] = useState<ReadonlyMap<string, Approval>>(
    () => new Map(initial.map((approval) => [approval.id, approval])),
  );
  const upsert = useCallback((approval: Approval) => setApprovals((known) => withApproval(known, approval)), []);
  return [approvals, upsert];
}
