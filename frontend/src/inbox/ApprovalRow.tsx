// One pending approval: what it would do, who asked and why, who it waits for, and the decision controls (none
// once the viewer approved it and it waits for the other approvers). Text that whoever asked wrote is shown
// with hidden characters spelled out (see visible.ts).
import { useState } from "react";
import type { Approval } from "../shared/api";
import { ArgsList } from "../shared/ArgsList";
import { Deadline } from "../shared/Deadline";
import { Awaiting, Tally } from "../shared/Quorum";
import { roughly, useNow } from "../shared/time";
import { reveal } from "../shared/visible";
import { DecisionForm, type DecisionBody } from "./DecisionForm";
import { useLinkedRow } from "./useLinked";

interface Props {
  approval: Approval;
  /** The viewer's principal id: its own vote reads "you". */
  me: string;
  /** Whether the page's link names this approval. */
  linked: boolean;
  onDecide: (body: DecisionBody) => Promise<void>;
}

export function ApprovalRow({ approval, me, linked, onDecide }: Props) {
  const now = useNow();
  const mark = useLinkedRow(linked);
  // kept here, not in the form: a refusal may end the viewer's turn (a 409 "approved already"), and still shows
  const [problem, setProblem] = useState("");
  const description = reveal(approval.description);
  // after an edit, the votes approve the edited arguments: the call that runs
  const args = approval.edited?.args ?? approval.call.args;

  async function decide(body: DecisionBody) {
    setProblem("");
    try {
      await onDecide(body);
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
      throw error;
    }
  }

  return (
    <li className="row" data-testid="approval-row" data-approval-id={approval.id} {...mark}>
      <div className="row-head">
        <h3 data-testid="description">{description}</h3>
        <span className="age">asked {roughly(now - approval.created_at)} ago</span>
        {approval.deadline !== undefined && <Deadline at={approval.deadline} />}
      </div>
      <p className="row-meta">
        <code>{approval.call.tool}</code> in chat{" "}
        <a href={`/?chat=${encodeURIComponent(approval.chat_id)}`} data-testid="chat-link">
          {reveal(approval.chat_id)}
        </a>
        {approval.requester && (
          <>
            {" "}
            of <code data-testid="requester">{reveal(approval.requester)}</code>
          </>
        )}{" "}
        · asked by rule <code>{approval.rule}</code>
      </p>
      <p className="row-quorum" data-testid="quorum">
        {approval.quorum > 1 && (
          <>
            <Tally approval={approval} me={me} />
            {" — "}
          </>
        )}
        waiting for <Awaiting approval={approval} />
        {approval.edited && " · with edited arguments"}
      </p>
      {approval.may_decide !== false ? (
        <DecisionForm
          approval={approval}
          args={args}
          label={`${description} (${approval.call.tool})`}
          onDecide={decide}
        />
      ) : (
        <ArgsList args={args} tool={approval.call.tool} context={approval.call.context} />
      )}
      {problem && (
        <p className="problem" role="alert" data-testid="decision-error">
          {problem}
        </p>
      )}
    </li>
  );
}
