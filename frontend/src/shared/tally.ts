// How far an approval that needs several approvers got, in words, for a given viewer.
import type { Approval } from "./api";
import { reveal } from "./visible";

/** Whether `id` approved it already, while it waits for others. */
export const votedBy = (approval: Approval, id: string): boolean =>
  approval.votes?.some((vote) => vote.by === id) ?? false;

/** "1 of 2: alice", like the server's `tally`, but with the viewer's own vote as "you". */
export function tally(approval: Approval, me: string): string {
  const votes = approval.votes ?? [];
  const names = votes.map((vote) => (vote.by === me ? "you" : reveal(vote.who || vote.name || vote.by))).join(", ");
  const counted = `${votes.length} of ${approval.quorum}`;
  return names ? `${counted}: ${names}` : counted;
}
