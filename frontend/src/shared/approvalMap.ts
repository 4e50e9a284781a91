import type { Approval } from "./api";

/** `known` with `approval` put last (most recently changed). States only move forward: a late "pending"
 * (an SSE feed's first snapshot) never undoes a decision already seen. */
export function withApproval(known: ReadonlyMap<string, Approval>, approval: Approval): ReadonlyMap<string, Approval> {
  if (approval.state === "pending" && (known.get(approval.id)?.state ?? "pending") !== "pending") return known;
  const next = new Map(known);
  next.delete(approval.id);
  return next.set(approval.id, approval);
}
