// An approval that left the pending list: how it ended and by whom; an edited call with its new digest.
import { decider, type Approval } from "../shared/api";
import { reveal } from "../shared/visible";
import { useLinkedRow } from "./useLinked";

const ENDED: Record<Approval["state"], string> = {
  pending: "pending",
  approved: "approved",
  consumed: "approved and run",
  denied: "denied",
  expired: "expired",
  cancelled: "cancelled",
};

interface Props {
  approval: Approval;
  conflict: string | undefined;
  /** Whether the page's link names this approval. */
  linked: boolean;
}

export function RecentRow({ approval, conflict, linked }: Props) {
  const mark = useLinkedRow(linked);
  const reason = approval.decision?.reason || approval.closed?.reason;
  const edit = approval.decision?.args;
  return (
    <li
      className="recent"
      data-testid="recent-row"
      data-approval-id={approval.id}
      data-state={approval.state}
      {...mark}
    >
      <span className={`badge badge-${approval.state}`}>{ENDED[approval.state]}</span>{" "}
      <strong>{reveal(approval.description)}</strong> by{" "}
      <span data-testid="decided-by">{reveal(decider(approval).name)}</span>
      {reason && <>: “{reveal(reason)}”</>}
      {edit && (
        <p className="edited" data-testid="edited">
          edited to <code data-testid="edited-args">{reveal(JSON.stringify(edit))}</code>
          {approval.decision?.digest && (
            <>
              {" "}
              · digest <code data-testid="edited-digest">{approval.decision.digest}</code>
            </>
          )}
        </p>
      )}
      {conflict && (
        <p className="conflict" role="alert" data-testid="conflict">
          {conflict}
        </p>
      )}
    </li>
  );
}
