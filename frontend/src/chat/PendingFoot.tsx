// The foot of a card whose approval is still open: Approve / Deny when this page may decide, else who it waits
// for ("waiting for finance, 1 of 2: alice"), kept live by the chat's events as votes land.
import type { Approval } from "../shared/api";
import { Awaiting, Tally } from "../shared/Quorum";
import { ApprovalActions, type Decide } from "./ApprovalActions";

interface Props {
  waiting: boolean;
  approval: Approval | undefined;
  me: string;
  onDecide: Decide;
}

export function PendingFoot({ waiting, approval, me, onDecide }: Props) {
  const several = approval !== undefined && approval.quorum > 1;
  if (!waiting || !approval) {
    return (
      <ApprovalActions onDecide={onDecide} mayRemember={!several}>
        {several && <Tally approval={approval} me={me} />}
      </ApprovalActions>
    );
  }
  return (
    <p className="card-note" data-testid="waiting">
      waiting for <Awaiting approval={approval} />
      {several && (
        <>
          , <Tally approval={approval} me={me} />
        </>
      )}
    </p>
  );
}
