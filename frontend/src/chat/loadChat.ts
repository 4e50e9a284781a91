// What the page needs before it shows the chat: the chat as the server holds it, and who this page is to the
// server (its session's principal, `browser:<id>`), whose decisions the cards call "you".
import { ApiError, fetchMe, requestJson, type Principal } from "../shared/api";
import type { ChatSnapshot } from "./Chat";

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
