// What the page needs before it shows the chat: the chat as the server holds it, and who this page is to the
// server (its session's principal, `browser:<id>`), whose decisions the cards call "you".
import type { UIMessage } from "ai";
import { ApiError, fetchMe, requestJson, type Approval, type Principal, type WaitMode } from "../shared/api";
import type { ToolInfo } from "./tools";

/** GET /api/chat/{id}. */
export interface ChatSnapshot {
  id: string;
  wait: WaitMode;
  /** A reply was running when the chat loaded; `messages` are the chat as it began. */
  running: boolean;
  /** That reply continues the last assistant message (it opens with results of earlier calls). */
  continues: boolean;
  /** No reply runs, but the last was cut while it waited on a person (its worker stopped or died): following
   * the chat at /stream continues it, with the decisions made meanwhile. */
  cut: boolean;
  messages: UIMessage[];
  approvals: Approval[];
  tools: ToolInfo[];
  /** Examples of what to write, where the served agent has them (the demo). */
  hint?: string;
}

export interface LoadedChat {
  snapshot: ChatSnapshot;
  me: Principal;
}

/** Who talks without any credential, where the server takes such chats but handed out no session. */
const ANONYMOUS: Principal = { id: "anonymous", name: "anonymous", roles: [], via: "none" };

export async function loadChat(chatId: string): Promise<LoadedChat> {
  const [snapshot, me] = await Promise.all([
    requestJson<ChatSnapshot>(`/api/chat/${encodeURIComponent(chatId)}`),
    fetchMe().catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 401) return ANONYMOUS;
      throw error;
    }),
  ]);
  return { snapshot, me };
}

/** The server answers another principal's chat as unknown (404): to this page, it is someone else's. */
export const notYours = (error: unknown): boolean => error instanceof ApiError && error.status === 404;
