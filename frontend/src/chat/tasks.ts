// Long-running calls (seed 004) as this page reads them: which tool parts started a task, and which of two
// records of a task is the newer.
import type { Task, TaskState, TaskStatus } from "../shared/api";
import type { ToolPart } from "./parts";

/** What a task card shows: the server's record, or what the call returned when the page has no record. */
export type TaskView = Pick<Task, "id" | "state" | "progress" | "message" | "result" | "error" | "cancel_by">;

const STATE: Record<TaskStatus["status"], TaskState> = {
  pending: "pending",
  processing: "running",
  completed: "completed",
  failed: "failed",
  cancelled: "cancelled",
};

export const finished = (state: TaskState): boolean =>
  state === "completed" || state === "failed" || state === "cancelled";

/** The part's output when its call started a task. */
export function taskOutput(part: ToolPart): TaskStatus | undefined {
  if (part.state !== "output-available") return undefined;
  const output = part.output as Partial<TaskStatus> | null | undefined;
  return typeof output?.task_id === "string" && typeof output.status === "string" ? (output as TaskStatus) : undefined;
}

/** The live record when there is one, unless the call's output already has the final word the record
 * has not caught up with yet (its event may come after the reply's chunk). */
export function taskView(output: TaskStatus, live: Task | undefined): TaskView {
  const state = STATE[output.status];
  if (live && !(finished(state) && !finished(live.state))) return live;
  const { task_id: id, progress, message, result, error } = output;
  return { id, state, progress, message, result, error };
}

/** `known` with `task` in it, unless `known` has a newer record of it. The same change comes several ways
 * (events, the reply's data parts, GET), so older and repeated ones are dropped; a finished task never
 * goes back to running, whatever the clocks of the workers that wrote the records say. */
export function withTask(known: ReadonlyMap<string, Task>, task: Task): ReadonlyMap<string, Task> {
  const before = known.get(task.id);
  if (before && (task.updated_at <= before.updated_at || (finished(before.state) && !finished(task.state)))) {
    return known;
  }
  return new Map(known).set(task.id, task);
}
