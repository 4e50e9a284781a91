// Who an approval waits for, and how far its quorum got, as parts of a sentence; the chat card and the inbox
// row each say it their way.
import type { Approval } from "./api";
import { tally } from "./tally";
import { reveal } from "./visible";

/** "finance", "the requester or an admin". */
export function Awaiting({ approval }: { approval: Approval }) {
  return <span data-testid="awaiting">{reveal(approval.awaiting)}</span>;
}

/** "1 of 2: alice"; `me` is the viewer's principal id, shown as "you". */
export function Tally({ approval, me }: { approval: Approval; me: string }) {
  return (
    <span className="tally" data-testid="tally">
      {tally(approval, me)}
    </span>
  );
}
