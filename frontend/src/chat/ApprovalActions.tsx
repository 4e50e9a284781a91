// Approve / Deny for a card that asks. Deny first asks for an optional reason. The row keeps one height in
// every step, so nothing below it moves.
import { useState, type FormEvent, type ReactNode } from "react";

export type Decide = (approved: boolean, reason: string, remember: boolean) => Promise<void>;

interface Props {
  onDecide: Decide;
  /** False when the approval needs several approvers: the server won't remember one person's vote. */
  mayRemember: boolean;
  /** Shown after the buttons, e.g. how far the quorum got. */
  children?: ReactNode;
}

export function ApprovalActions({ onDecide, mayRemember, children }: Props) {
  const [denying, setDenying] = useState(false);
  const [reason, setReason] = useState("");
  const [remember, setRemember] = useState(false);
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState("");

  async function decide(approved: boolean) {
    setBusy(true);
    setProblem("");
    try {
      await onDecide(approved, approved ? "" : reason.trim(), approved && remember);
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
      setBusy(false);
    }
  }

  function confirmDeny(event: FormEvent) {
    event.preventDefault();
    void decide(false);
  }

  return (
    <div className="actions">
      {denying ? (
        <form className="deny-form" onSubmit={confirmDeny}>
          <label>
            Reason <span className="hint">(optional)</span>
            <input
              data-testid="deny-reason"
              value={reason}
              onChange={(event) => setReason(event.target.value)}
              placeholder="e.g. not this month"
              autoFocus
            />
          </label>
          <button type="submit" className="danger" data-testid="deny-confirm" disabled={busy}>
            Deny
          </button>
          <button type="button" onClick={() => setDenying(false)} disabled={busy}>
            Back
          </button>
        </form>
      ) : (
        <>
          <button
            type="button"
            className="primary"
            data-testid="approve"
            disabled={busy}
            onClick={() => void decide(true)}
          >
            Approve
          </button>
          <button type="button" data-testid="deny" disabled={busy} onClick={() => setDenying(true)}>
            Deny…
          </button>
          {mayRemember && (
            <label className="remember">
              <input
                type="checkbox"
                data-testid="remember"
                checked={remember}
                onChange={(event) => setRemember(event.target.checked)}
                disabled={busy}
              />
              Remember for this chat
            </label>
          )}
          {children}
        </>
      )}
      {problem && (
        <p className="problem" role="alert" data-testid="decision-error">
          {problem}
        </p>
      )}
    </div>
  );
}
