// How the viewer decides one pending approval: its arguments (editable as JSON), a reason, how long to remember
// an approval, and Approve / Deny. A decision that fails throws to the row, which says why.
import { useState } from "react";
import type { Approval, Remember } from "../shared/api";
import { ArgsList } from "../shared/ArgsList";

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

interface Props {
  approval: Approval;
  /** The arguments to show and start an edit from: the call's, or the latest edit's. */
  args: Record<string, unknown>;
  /** What the row calls the approval, for the controls' labels. */
  label: string;
  onDecide: (body: DecisionBody) => Promise<void>;
}

export function DecisionForm({ approval, args, label, onDecide }: Props) {
  const [reason, setReason] = useState("");
  const [remember, setRemember] = useState<Remember>("once");
  const [argsText, setArgsText] = useState<string>();
  const [busy, setBusy] = useState(false);
  const edited = argsText === undefined ? undefined : parseArgs(argsText);
  // one approver's vote of several is never remembered (the server refuses it)
  const mayRemember = approval.quorum <= 1;

  async function decide(approved: boolean) {
    if (approved && edited && "error" in edited) return;
    setBusy(true);
    try {
      await onDecide({
        approved,
        reason: reason.trim(),
        remember: approved && mayRemember ? remember : "once",
        ...(approved && edited && "args" in edited && { args: edited.args }),
      });
    } catch {
      setBusy(false); // the row shows the server's answer
    }
  }

  return (
    <>
      {argsText === undefined ? (
        <ArgsList args={args} tool={approval.call.tool} context={approval.call.context} />
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
        {mayRemember && (
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
        )}
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
          onClick={() => setArgsText(argsText === undefined ? JSON.stringify(args, null, 2) : undefined)}
        >
          {argsText === undefined ? "Edit arguments" : "Cancel edit"}
        </button>
      </div>
    </>
  );
}
