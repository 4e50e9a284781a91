// GET /api/chat/{id}/events, one EventSource for the page: every change of this chat's approvals and tasks,
// and word of a reply the server starts on its own (a browser call that got no result in time).
import { useEffect, useRef } from "react";
import type { Approval, Task } from "../shared/api";

export interface ChatEvents {
  /** The stream (re)connected. It sends the unfinished tasks again, but not those that finished meanwhile. */
  open: () => void;
  approval: (approval: Approval) => void;
  task: (task: Task) => void;
  reply: () => void;
}

export function useChatEvents(chatId: string, on: ChatEvents): void {
  const handlers = useRef(on);
  handlers.current = on;
  useEffect(() => {
    const events = new EventSource(`/api/chat/${encodeURIComponent(chatId)}/events`);
    events.addEventListener("open", () => handlers.current.open());
    events.addEventListener("approval", (event) => handlers.current.approval(JSON.parse(event.data) as Approval));
    events.addEventListener("task", (event) => handlers.current.task(JSON.parse(event.data) as Task));
    events.addEventListener("reply", () => handlers.current.reply());
    return () => events.close();
  }, [chatId]);
}
