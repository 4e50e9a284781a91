// Where a call's task stands: a progress bar with Cancel while it runs, then its result, error, or
// "Cancelled".
import { useState } from "react";
import { ArgsList } from "../shared/ArgsList";
import { finished, type TaskView } from "./tasks";

interface Props {
  task: TaskView;
  onCancel: () => Promise<void>;
}

export function TaskProgress({ task, onCancel }: Props) {
  return (
    <div className={`task task-${task.state}`} data-testid="task" data-task-id={task.id} data-state={task.state}>
      {finished(task.state) ? <Outcome task={task} /> : <Running task={task} onCancel={onCancel} />}
    </div>
  );
}

function Running({ task, onCancel }: Props) {
  const [asked, setAsked] = useState(false);
  const [problem, setProblem] = useState("");
  // cancel_by: someone asked already (maybe elsewhere, or before a reload); the body stops at its next chance
  const cancelling = asked || Boolean(task.cancel_by);
  const percent = Math.round(task.progress);
  const text = task.message || (task.state === "pending" ? "Waiting to start…" : "Working…");

  async function cancel() {
    setAsked(true);
    setProblem("");
    try {
      await onCancel();
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
      setAsked(false);
    }
  }

  return (
    <>
      <div
        className="task-bar"
        role="progressbar"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={percent}
        aria-label={text}
      >
        <div className="task-fill" style={{ width: `${percent}%` }} />
      </div>
      <div className="task-line">
        <span className="task-message" data-testid="task-message">
          {text}
        </span>
        <span className="task-percent" data-testid="task-percent">
          {percent}%
        </span>
        <button type="button" data-testid="task-cancel" disabled={cancelling} onClick={() => void cancel()}>
          {cancelling ? "Cancelling…" : "Cancel"}
        </button>
      </div>
      {problem && (
        <p className="problem" role="alert" data-testid="task-cancel-error">
          {problem}
        </p>
      )}
    </>
  );
}

function Outcome({ task }: { task: TaskView }) {
  switch (task.state) {
    case "completed":
      return (
        <>
          <p className="task-outcome">Done</p>
          <Result value={task.result} />
        </>
      );
    case "failed":
      return (
        <>
          <p className="task-outcome">Failed</p>
          <p className="task-error" data-testid="task-error">
            {task.error || "the task failed without saying why"}
          </p>
        </>
      );
    default:
      return <p className="task-outcome">Cancelled</p>;
  }
}

/** An object's fields as name/value pairs, like a call's arguments; anything else as one line. */
function Result({ value }: { value: unknown }) {
  const fields =
    typeof value === "object" && value !== null && !Array.isArray(value) && Object.keys(value).length > 0
      ? (value as Record<string, unknown>)
      : undefined;
  return (
    <div className="task-result" data-testid="task-result">
      {fields ? (
        <ArgsList args={fields} testId="task-result-fields" />
      ) : value === undefined || value === null ? (
        <span className="hint">no result</span>
      ) : (
        <span>{typeof value === "string" ? value : JSON.stringify(value)}</span>
      )}
    </div>
  );
}
