// One line that says what the chat is doing, announced to screen readers; errors get a Dismiss button.
import type { ChatStatus } from "ai";
import type { Approval } from "../shared/api";
import { reveal } from "../shared/visible";
import type { ToolPart } from "./parts";

interface Props {
  status: ChatStatus;
  error: Error | undefined;
  /** The tool parts of the last step. */
  tools: ToolPart[];
  approvals: ReadonlyMap<string, Approval>;
  onDismiss: () => void;
}

/** The server answers errors as `{"error": {"message": ...}}`; the AI SDK hands over that body as text. */
function readable(error: Error): string {
  try {
    const parsed = JSON.parse(error.message) as { error?: { message?: string } };
    return parsed.error?.message ?? error.message;
  } catch {
    return error.message;
  }
}

/** The step's open approvals: whether this page may decide one, else the first that waits for others. */
function openApprovals(tools: ToolPart[], approvals: ReadonlyMap<string, Approval>) {
  const pending = tools
    .flatMap((part) => (part.state === "approval-requested" ? [approvals.get(part.approval.id)] : []))
    .filter((approval) => (approval?.state ?? "pending") === "pending");
  return {
    mine: pending.some((approval) => approval?.may_decide !== false),
    others: pending.find((approval) => approval?.may_decide === false),
  };
}

function say(status: ChatStatus, error: Error | undefined, tools: ToolPart[], approvals: Props["approvals"]) {
  if (error) return `Something went wrong: ${readable(error)}`;
  const { mine, others } = openApprovals(tools, approvals);
  if (mine) return "Waiting for your approval.";
  if (others) return `Waiting for ${reveal(others.awaiting)} to approve.`;
  if (status === "submitted") return "Sending…";
  return status === "streaming" ? "The assistant is answering…" : "Ready.";
}

export function StatusLine({ status, error, tools, approvals, onDismiss }: Props) {
  const text = say(status, error, tools, approvals);
  return (
    <div className={`status ${error ? "status-error" : ""}`}>
      <p role="status" aria-live="polite" data-testid="status">
        {text}
      </p>
      {error && (
        <button type="button" onClick={onDismiss}>
          Dismiss
        </button>
      )}
    </div>
  );
}
