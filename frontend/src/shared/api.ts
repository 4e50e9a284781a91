// The server's JSON shapes (see the approvals API in the README) and one fetch helper for them.

export type ApprovalState = "pending" | "approved" | "denied" | "expired" | "cancelled" | "consumed";
export type Remember = "once" | "session" | "always";
export type WaitMode = "deferred" | "blocking";

export interface Approval {
  id: string;
  chat_id: string;
  state: ApprovalState;
  call: { call_id: string; tool: string; args: Record<string, unknown> };
  digest: string;
  description: string;
  rule: string;
  created_at: number;
  deadline?: number;
  decision?: {
    verdict: "approve" | "deny" | "edit";
    by: string;
    reason: string;
    remember: Remember;
    args?: Record<string, unknown>;
    digest?: string;
  };
  closed?: { by: string; reason: string };
  consumed_at?: number;
}

export interface Grant {
  id: string;
  tool: string;
  scope: Remember;
  any_args: boolean;
  created_by: string;
  created_at: number;
  approval_id: string;
  active: boolean;
  digest?: string;
  chat_id?: string;
  revoked?: { at: number; by: string };
}

export type TaskState = "pending" | "running" | "completed" | "failed" | "cancelled";

/** What a long-running tool's call returns (seed 004's status format): at once `pending`, then, while the
 * reply still streams, the final word. A running task is `processing` here. */
export interface TaskStatus {
  status: "pending" | "processing" | "completed" | "failed" | "cancelled";
  task_id: string;
  progress: number;
  message?: string;
  result?: unknown;
  error?: string;
}

/** A long-running call's work, as the server records it. Keys without a value are left out. */
export interface Task {
  id: string;
  chat_id: string;
  call_id: string;
  tool: string;
  state: TaskState;
  status: TaskStatus;
  progress: number;
  message?: string;
  result?: unknown;
  error?: string;
  created_at: number;
  updated_at: number;
  finished_at?: number;
  /** Who asked a running task to stop; it ends `cancelled` once its body stops. */
  cancel_by?: string;
}

/** A non-2xx answer: the server's message, and on a 409 the approval or task as the winner left it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly approval?: Approval,
    readonly task?: Task,
  ) {
    super(message);
  }
}

/** Who closed an approval: the decider, or whoever expired or cancelled it. */
export function decidedBy(approval: Approval): string {
  return approval.decision?.by ?? approval.closed?.by ?? "someone else";
}

/** Fetches JSON; a non-2xx answer throws an ApiError carrying the server's `error.message` (or `error`,
 * when it is only a text). */
export async function requestJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  if (init.body !== undefined) headers.set("content-type", "application/json");
  const response = await fetch(url, { ...init, headers });
  const body: unknown = await response.json().catch(() => undefined);
  if (response.ok) return body as T;
  const { error, approval, task } = (body ?? {}) as {
    error?: string | { message?: string };
    approval?: Approval;
    task?: Task;
  };
  const message = typeof error === "string" ? error : error?.message;
  throw new ApiError(response.status, message ?? `${response.status} ${response.statusText}`, approval, task);
}
