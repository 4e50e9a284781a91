// The inbox: pending approvals live from the feed, recent decisions, and the remembered decisions.
import { useReducer, useState } from "react";
import { ApiError, decidedBy, requestJson, type Approval } from "../shared/api";
import { ApprovalRow, type DecisionBody } from "./ApprovalRow";
import { GrantsList } from "./GrantsList";
import { RecentRow } from "./RecentRow";
import { useApprovalFeed } from "./useApprovalFeed";

const RECENT = 10;
const FEED_STATE = { connecting: "Connecting…", live: "Live", reconnecting: "Connection lost; reconnecting…" };

export function Inbox({ token, onUnauthorized }: { token: string; onUnauthorized: () => void }) {
  const { approvals, upsert, state } = useApprovalFeed(token, onUnauthorized);
  const [conflicts, setConflicts] = useState<ReadonlyMap<string, string>>(new Map());
  const [decisions, countDecision] = useReducer((n: number) => n + 1, 0);
  const all = [...approvals.values()];
  const pending = all.filter((a) => a.state === "pending").sort((a, b) => a.created_at - b.created_at);
  const decided = all.filter((a) => a.state !== "pending").reverse();

  async function decide(approval: Approval, body: DecisionBody) {
    try {
      const url = `/api/approvals/${encodeURIComponent(approval.id)}/decision`;
      const init = {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
        body: JSON.stringify({ ...body, by: "inbox" }),
      };
      upsert(await requestJson<Approval>(url, init));
    } catch (error) {
      if (!(error instanceof ApiError && error.approval)) throw error;
      const winner = error.approval;
      upsert(winner);
      setConflicts((known) => new Map(known).set(approval.id, `already decided by ${decidedBy(winner)}`));
    } finally {
      countDecision();
    }
  }

  return (
    <>
      <section aria-labelledby="pending-title">
        <h2 id="pending-title">
          Waiting for a decision <span className="count">{pending.length}</span>
        </h2>
        <p className={`feed feed-${state}`} role="status" aria-live="polite" data-testid="feed-state">
          {FEED_STATE[state]}
        </p>
        {pending.length === 0 && state === "live" && <p className="empty">Nothing is waiting.</p>}
        <ul className="rows">
          {pending.map((approval) => (
            <ApprovalRow key={approval.id} approval={approval} onDecide={(body) => decide(approval, body)} />
          ))}
        </ul>
      </section>
      {decided.length > 0 && (
        <section aria-labelledby="recent-title">
          <h2 id="recent-title">Recent</h2>
          <ul className="recents">
            {decided.slice(0, RECENT).map((approval) => (
              <RecentRow key={approval.id} approval={approval} conflict={conflicts.get(approval.id)} />
            ))}
          </ul>
        </section>
      )}
      {/* a decision anywhere may have made a grant ("remember"), so any new one refreshes the list */}
      <GrantsList token={token} refresh={decisions + decided.length} />
    </>
  );
}
