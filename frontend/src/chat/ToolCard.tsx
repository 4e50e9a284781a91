// One tool call as a card: what it does in plain words, the tool and its arguments, and where it stands.
import { getToolName } from "ai";
import type { Approval } from "../shared/api";
import { ArgsList } from "../shared/ArgsList";
import { Deadline } from "../shared/Deadline";
import { reveal } from "../shared/visible";
import type { Decide } from "./ApprovalActions";
import { cardState, headline, type CardState } from "./describe";
import type { ToolPart } from "./parts";
import { PendingFoot } from "./PendingFoot";
import { TaskProgress } from "./TaskProgress";
import type { TaskView } from "./tasks";
import type { ToolInfo } from "./tools";

const LABEL: Record<CardState, string> = {
  asking: "asking you",
  waiting: "waiting",
  approved: "approved",
  running: "running",
  done: "done",
  refused: "refused",
  expired: "expired",
  error: "error",
  cancelled: "cancelled",
  unknown: "outcome unknown",
};

interface Props {
  part: ToolPart;
  /** What the server says of the tool, if anything. */
  info: ToolInfo | undefined;
  approval: Approval | undefined;
  /** The page's principal id (`browser:<id>`): its decisions and votes read "you". */
  me: string;
  /** Set when this page's answer lost to an earlier decision from elsewhere. */
  conflict: string | undefined;
  onDecide: Decide;
  /** Where the task stands, when the call started one. */
  task: TaskView | undefined;
  onCancelTask: (taskId: string) => Promise<void>;
}

export function ToolCard({ part, info, approval, me, conflict, onDecide, task, onCancelTask }: Props) {
  const tool = getToolName(part);
  const { state, note } = cardState(part, approval, me, info?.browser ?? false, task?.state);
  // approved (or, while others still vote, edited) with other arguments: those are the ones that run
  const args = approval?.decision?.args ?? approval?.edited?.args ?? ((part.input ?? {}) as Record<string, unknown>);
  const open = state === "asking" || state === "waiting";
  // a task says itself where it stands: its card's note only says who approved it, if anyone
  const showNote = !task || Boolean(note || conflict);
  return (
    <article
      className={`card card-${state}`}
      data-testid="tool-card"
      data-tool={tool}
      data-state={state}
      data-call-id={part.toolCallId}
    >
      <header className="card-head">
        <span className={`badge badge-${state}`} data-testid="badge">
          {LABEL[state]}
        </span>
        <h3 data-testid="headline">{reveal(headline(tool, args, approval, info?.title))}</h3>
      </header>
      <p className="card-meta">
        <code>{tool}</code>
        {open && approval?.deadline !== undefined && <Deadline at={approval.deadline} />}
      </p>
      <ArgsList args={args} />
      <div className={`card-foot ${task ? "card-foot-task" : ""}`}>
        {task && <TaskProgress task={task} onCancel={() => onCancelTask(task.id)} />}
        {open ? (
          <PendingFoot waiting={state === "waiting"} approval={approval} me={me} onDecide={onDecide} />
        ) : (
          showNote && (
            <p className="card-note" data-testid="card-note">
              {note}
              {conflict && (
                <span className="conflict" data-testid="conflict">
                  {" — "}
                  {conflict}
                </span>
              )}
            </p>
          )
        )}
      </div>
    </article>
  );
}
