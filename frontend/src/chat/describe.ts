// Plain words for a tool card: its headline, and its state with the detail a person needs. Names and reasons
// come from other people, so they are shown with hidden characters spelled out (see visible.ts).
import type { Approval, TaskState } from "../shared/api";
import { reveal } from "../shared/visible";
import type { ToolPart } from "./parts";
import { fillTitle } from "./title";

/** `asking`: this page may decide; `waiting`: it is up to others (a rule that names approvers, four eyes). */
export type CardState =
  | "asking"
  | "waiting"
  | "approved"
  | "running"
  | "done"
  | "refused"
  | "expired"
  | "error"
  | "cancelled"
  /** It started, and its process died before it could say how it ended. */
  | "unknown";

/** The status the server gives a call that started and whose outcome was never recorded (a worker died). */
const UNKNOWN = "outcome unknown";

const TASK_CARD: Record<TaskState, CardState> = {
  pending: "running",
  running: "running",
  completed: "done",
  failed: "error",
  cancelled: "cancelled",
};

const text = (value: unknown, fallback: string) =>
  typeof value === "string" || typeof value === "number" ? String(value) : fallback;

/** The approval's own description when there is one (unless the call was edited), else the tool's title from
 * the server filled from the arguments, else `Run <tool>`. */
export function headline(
  tool: string,
  args: Record<string, unknown>,
  approval: Approval | undefined,
  title: string | undefined,
): string {
  if (approval?.description && !approval.decision?.args && !approval.edited) return approval.description;
  return title ? fillTitle(title, args) : `Run ${tool}`;
}

/** "alice", "alice and bob", "alice, bob and carol". */
const together = (names: string[]): string =>
  names.length > 1 ? `${names.slice(0, -1).join(", ")} and ${names.at(-1)}` : (names[0] ?? "");

const REMEMBERED = { once: "", session: ", remembered for this chat", always: ", remembered for every chat" };

/** The card's state and a line in plain words about it, from the message part and the server's record of its
 * approval. `me` is the page's principal id (`browser:<id>`), whose decisions read "you"; `browser`: the server
 * said the browser runs the tool. A call that started a task takes its state from the task, whose own words
 * the card shows apart (TaskProgress). */
export function cardState(
  part: ToolPart,
  approval: Approval | undefined,
  me: string,
  browser: boolean,
  task?: TaskState,
): { state: CardState; note: string } {
  const decision = approval?.decision;
  const name = (id: string, shown: string) => (id === me ? "you" : reveal(shown || id));
  const by = decision ? name(decision.by, decision.who || decision.name || "") : "you";
  // a quorum's approvers, each of whom the votes name: "alice (finance) and bob"
  const votes = approval?.votes ?? [];
  const approvers = votes.length > 1 ? together(votes.map((vote) => name(vote.by, vote.who || vote.name))) : by;
  const because = (reason: string | undefined) => (reason ? `: ${reveal(reason)}` : "");
  const edited = decision?.args ? " with edited arguments" : "";
  const approved = `approved by ${approvers}${edited}${REMEMBERED[decision?.remember ?? "once"]}`;
  const refused = (reason: string | undefined) => ({
    state: "refused" as const,
    note: `refused${by === "you" ? "" : ` by ${by}`}${because(reason)}`,
  });
  const closed = (): { state: CardState; note: string } => {
    switch (approval?.state) {
      case "expired":
        return { state: "expired", note: `expired${because(approval.closed?.reason) || ": nobody decided in time"}` };
      case "cancelled":
        return { state: "refused", note: cancelled(approval.closed, me, because) };
      case "denied":
        return refused(decision?.reason);
      default:
        return { state: "approved", note: approved };
    }
  };
  switch (part.state) {
    case "input-streaming":
    case "input-available":
      return { state: "running", note: browser ? "running in this browser…" : "running…" };
    case "approval-requested":
      if (approval && approval.state !== "pending") return closed();
      return { state: approval?.may_decide === false ? "waiting" : "asking", note: "" };
    case "approval-responded":
      if (approval && approval.state !== "pending") return closed();
      return part.approval.approved ? { state: "approved", note: approved } : refused(part.approval.reason);
    case "output-denied":
      return approval?.state === "expired" || approval?.state === "cancelled"
        ? closed()
        : refused(part.approval.reason || decision?.reason);
    case "output-error":
      return { state: "error", note: part.errorText };
    case "output-available": {
      if (task) return { state: TASK_CARD[task], note: decision ? approved : "" };
      const output = part.output as { success?: unknown; error?: unknown; status?: unknown; message?: unknown } | undefined;
      if (output?.status === UNKNOWN) return { state: "unknown", note: text(output.message, "its outcome is unknown") };
      if (output?.success === false) return { state: "error", note: text(output.error, "it failed") };
      return { state: "done", note: decision ? `done · ${approved}` : "done" };
    }
  }
}

/** A cancelled approval's words: "a new message withdrew it", "cancelled by you: …", "cancelled by alice: …". */
function cancelled(closed: Approval["closed"], me: string, because: (reason: string | undefined) => string): string {
  if (closed?.who === "a new message") return "a new message withdrew it";
  const who = closed?.by === me ? "you" : reveal(closed?.who || "signoff");
  return `cancelled by ${who}${because(closed?.reason)}`;
}
