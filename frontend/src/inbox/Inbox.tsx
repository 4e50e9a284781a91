// The inbox: pending approvals live from the feed, recent decisions, and the remembered decisions. It lists the
// approvals `me` may decide, and those waiting for other approvers after `me` approved them already.
import { useReducer, useState } from "react";
import { ApiError, decider, postJson, type Approval, type Principal } from "../shared/api";
import { votedBy } from "../shared/tally";
import { reveal } from "../shared/visible";
import { ApprovalRow } from "./ApprovalRow";
import type { DecisionBody } from "./DecisionForm";
import { GrantsList } from "./GrantsList";
import { RecentRow } from "./RecentRow";
import { useApprovalFeed } from "./useApprovalFeed";
import { useLinked } from "./useLinked";

const RECENT = 10;
const FEED_STATE = { connecting: "Connecting…", live: "Live", reconnecting: "Connection lost; reconnecting…" };

interface Props {
  token: string;
  me: Principal;
  onUnauthorized: () => void;
}

export function Inbox({ token, me, onUnauthorized }: Props) {
  const { approvals, upsert, state } = useApprovalFeed(token, onUnauthorized);
  const [conflicts, setConflicts] = useState<ReadonlyMap<string, string>>(new Map());
  const [decisions, countDecision] = useReducer((n: number) => n + 1, 0);
  const linked = useLinked();
  const all = [...approvals.values()];
  const mine = (a: Approval) => a.may_decide !== false || votedBy(a, me.id);
  const pending = all.filter((a) => a.state === "pending" && mine(a)).sort((a, b) => a.created_at - b.created_at);
  const decided = all.filter((a) => a.state !== "pending").reverse();

  async function decide(approval: Approval, body: DecisionBody) {
    // who decides is the token's principal: the server takes it from the credential, never from the body
    const url = `/api/approvals/${encodeURIComponent(approval.id)}/decision`;
    try {
      upsert(await postJson<Approval>(url, body, { headers: { authorization: `Bearer ${token}` } }));
    } catch (error) {
      if (!(error instanceof ApiError && error.approval)) throw error;
      const now = error.approval;
      if (now.state === "pending") {
        // refused (403: the rule does not name `me`; 409: `me` approved it already): the row says why, and
        // stays while it would still be listed
        if (mine(now)) upsert(now);
        throw error;
      }
      upsert(now);
      setConflicts((known) => new Map(known).set(approval.id, `already decided by ${reveal(decider(now).name)}`));
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
            <ApprovalRow
              key={approval.id}
              approval={approval}
              me={me.id}
              linked={approval.id === linked}
              onDecide={(body) => decide(approval, body)}
            />
          ))}
        </ul>
      </section>
      {decided.length > 0 && (
        <section aria-labelledby="recent-title">
          <h2 id="recent-title">Recent</h2>
          <ul className="recents">
            {decided.slice(0, RECENT).map((approval) => (
              <RecentRow
                key={approval.id}
                approval={approval}
                conflict={conflicts.get(approval.id)}
                linked={approval.id === linked}
              />
            ))}
          </ul>
        </section>
      )}
      {/* a decision anywhere may have made a grant ("remember"), so any new one refreshes the list */}
      <GrantsList token={token} refresh={decisions + decided.length} />
    </>
  );
}
