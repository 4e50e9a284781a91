// One line that says what the chat is doing, announced to screen readers; errors get a Dismiss button.
import type { ChatStatus } from "ai";
import type { Approval } from "../shared/api";
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

export function StatusLine({ status, error, tools, approvals, onDismiss }: Props) {
  const asking = tools.some(
    (part) =>
      part.state === "approval-requested" && (approvals.get(part.approval.id)?.state ?? "pending") === "pending",
  );
  const text = error
    ? `Something went wrong: ${readable(error)}`
    : asking
      ? "Waiting for your approval."
      : status === "submitted"
        ? "Sending…"
        : status === "streaming"
          ? "The assistant is answering…"
          : "Ready.";
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
