// The server's JSON shapes (see the approvals API in the README) and one fetch helper for them.

export type ApprovalState = "pending" | "approved" | "denied" | "expired" | "cancelled" | "consumed";
export type Remember = "once" | "session" | "always";
export type WaitMode = "deferred" | "blocking";

/** Who a request is from (`GET /api/me`): `browser:<id>` for the chat page's own session, `admin` for the
 * bootstrap token, a registered principal's name for a personal token. */
export interface Principal {
  id: string;
  name: string;
  roles: string[];
  via: string;
}

/** One approval of a call that needs several (a quorum) before it is decided. */
export interface Vote {
  by: string;
  name: string;
  /** As a person reads it: "alice (finance)". */
  who?: string;
  verdict: "approve" | "edit";
  at: number;
}

export interface Approval {
  id: string;
  chat_id: string;
  state: ApprovalState;
  /** `context`: where the call was made, as its client said (Claude Code's `cwd`). */
  call: { call_id: string; tool: string; args: Record<string, unknown>; context?: Record<string, string> };
  digest: string;
  description: string;
  rule: string;
  created_at: number;
  deadline?: number;
  /** The principal whose chat asked. */
  requester?: string;
  /** How many distinct principals must approve. */
  quorum: number;
  approvers?: string[];
  /** Present (false) only when the requester may not decide: four eyes. */
  requester_may_approve?: boolean;
  /** Who may decide, in words: "finance", "the requester or an admin". */
  awaiting: string;
  /** How far the quorum got, in words: "1 of 2: alice". */
  tally: string;
  /** The approvals so far, while it waits for more. */
  votes?: Vote[];
  /** The arguments of the latest edit: the call that runs. */
  edited?: { args: Record<string, unknown>; digest: string };
  decision?: {
    verdict: "approve" | "deny" | "edit";
    by: string;
    name?: string;
    /** Who decided, as a person reads it: "alice (finance)", "the chat's user", "the deadline". */
    who?: string;
    via?: string;
    reason: string;
    remember: Remember;
    args?: Record<string, unknown>;
    digest?: string;
  };
  /** Who closed it without a decision, `who` as a person reads it: "the deadline", "a new message". */
  closed?: { by: string; who?: string; reason: string };
  consumed_at?: number;
  /** Whether a decision from the principal of the request that fetched it would count now. */
  may_decide?: boolean;
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

/** Who closed an approval, as an id and as a person reads it: the decider, or whoever expired or cancelled it
 * ("the deadline", "a new message"); never an id. */
export function decider(approval: Approval): { id: string; name: string } {
  const { decision, closed } = approval;
  if (decision) return { id: decision.by, name: decision.who || decision.name || decision.by };
  return { id: closed?.by ?? "", name: closed?.who || "someone else" };
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

/** POSTs `body` as JSON. The server refuses any POST that is not `application/json` (415), even one without
 * a body, since that is what makes a cross-site POST need a CORS preflight; so a body-less POST sends `{}`. */
export function postJson<T>(url: string, body: object = {}, init: RequestInit = {}): Promise<T> {
  return requestJson<T>(url, { ...init, method: "POST", body: JSON.stringify(body) });
}

/** Who the request's credential says it is: the page's own session cookie, or `authorization`'s token. */
export function fetchMe(authorization?: string): Promise<Principal> {
  return requestJson<Principal>("/api/me", authorization ? { headers: { authorization } } : {});
}
