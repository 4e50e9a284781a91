// One pending approval: what it would do, who asked and why, and the decision controls.
import { useState } from "react";
import type { Approval, Remember } from "../shared/api";
import { ArgsList } from "../shared/ArgsList";
import { Deadline } from "../shared/Deadline";
import { roughly, useNow } from "../shared/time";

export interface DecisionBody {
  approved: boolean;
  reason: string;
  remember: Remember;
  args?: Record<string, unknown>;
}

/** The edited arguments, or why they are not a JSON object. */
function parseArgs(text: string): { args: Record<string, unknown> } | { error: string } {
  try {
    const args: unknown = JSON.parse(text);
    if (typeof args === "object" && args !== null && !Array.isArray(args))
      return { args: args as Record<string, unknown> };
    return { error: 'the arguments must be a JSON object, like {"amount": 5}' };
  } catch (error) {
    return { error: error instanceof Error ? error.message : String(error) };
  }
}

export function ApprovalRow({
  approval,
  onDecide,
}: {
  approval: Approval;
  onDecide: (body: DecisionBody) => Promise<void>;
}) {
  const now = useNow();
  const [reason, setReason] = useState("");
  const [remember, setRemember] = useState<Remember>("once");
  const [argsText, setArgsText] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState("");
  const edited = argsText === undefined ? undefined : parseArgs(argsText);
  const label = `${approval.description} (${approval.call.tool})`;

  async function decide(approved: boolean) {
    if (approved && edited && "error" in edited) return;
    setBusy(true);
    setProblem("");
    try {
      await onDecide({
        approved,
        reason: reason.trim(),
        remember: approved ? remember : "once",
        ...(approved && edited && "args" in edited && { args: edited.args }),
      });
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
      setBusy(false);
    }
  }

  return (
    <li className="row" data-testid="approval-row" data-approval-id={approval.id}>
      <div className="row-head">
        <h3 data-testid="description">{approval.description}</h3>
        <span className="age">asked {roughly(now - approval.created_at)} ago</span>
        {approval.deadline !== undefined && <Deadline at={approval.deadline} />}
      </div>
      <p className="row-meta">
        <code>{approval.call.tool}</code> in chat{" "}
        <a href={`/?chat=${encodeURIComponent(approval.chat_id)}`} data-testid="chat-link">
          {approval.chat_id}
        </a>{" "}
        · asked by rule <code>{approval.rule}</code>
      </p>
      {argsText === undefined ? (
        <ArgsList args={approval.call.args} />
      ) : (
        <div className="args-edit">
          <label htmlFor={`args-${approval.id}`}>Arguments (JSON)</label>
          <textarea
            id={`args-${approval.id}`}
            data-testid="args-editor"
            value={argsText}
            onChange={(event) => setArgsText(event.target.value)}
            rows={4}
            spellCheck={false}
            aria-invalid={edited !== undefined && "error" in edited}
          />
          <p className="problem" data-testid="args-error" aria-live="polite">
            {edited && "error" in edited ? edited.error : ""}
          </p>
        </div>
      )}
      <div className="row-actions">
        <label>
          Reason
          <input
            data-testid="reason"
            value={reason}
            onChange={(event) => setReason(event.target.value)}
            placeholder="optional"
            aria-label={`Reason for ${label}`}
          />
        </label>
        <label>
          Remember
          <select
            data-testid="remember"
            value={remember}
            onChange={(event) => setRemember(event.target.value as Remember)}
            aria-label={`Remember the approval of ${label}`}
          >
            <option value="once">just this once</option>
            <option value="session">for this chat</option>
            <option value="always">for every chat</option>
          </select>
        </label>
        <button
          type="button"
          className="primary"
          data-testid="approve"
          disabled={busy || (edited !== undefined && "error" in edited)}
          onClick={() => void decide(true)}
        >
          {argsText === undefined ? "Approve" : "Approve edited"}
        </button>
        <button type="button" className="danger" data-testid="deny" disabled={busy} onClick={() => void decide(false)}>
          Deny
        </button>
        <button
          type="button"
          data-testid="edit-args"
          disabled={busy}
          onClick={() => setArgsText(argsText === undefined ? JSON.stringify(approval.call.args, null, 2) : undefined)}
        >
          {argsText === undefined ? "Edit arguments" : "Cancel edit"}
        </button>
      </div>
      {problem && (
        <p className="problem" role="alert" data-testid="decision-error">
          {problem}
        </p>
      )}
    </li>
  );
}
