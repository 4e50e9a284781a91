// This chat's long-running tasks, kept live: GET /api/chat/{id}/tasks whenever the chat's events (re)connect,
// every `task` event (see useChatEvents), and the `data-task` parts of the streamed reply. Newest wins.
import type { UIMessage } from "ai";
import { useCallback, useEffect, useState } from "react";
import { ApiError, postJson, requestJson, type Task } from "../shared/api";
import { withTask } from "./tasks";

export interface ChatTasks {
  tasks: ReadonlyMap<string, Task>;
  upsert: (task: Task) => void;
  load: () => void;
  /** Asks a task to stop; throws the server's refusal, after taking the task it sends along. */
  cancel: (taskId: string) => Promise<void>;
}

export function useChatTasks(chatId: string, messages: UIMessage[]): ChatTasks {
  const [tasks, setTasks] = useState<ReadonlyMap<string, Task>>(new Map());
  const upsert = useCallback((task: Task) => setTasks((known) => withTask(known, task)), []);
  const url = `/api/chat/${encodeURIComponent(chatId)}/tasks`;

  // A failed load leaves the cards to the calls' outputs and the events, which still say where tasks stand.
  const load = useCallback(() => {
    requestJson<{ tasks: Task[] }>(url).then(({ tasks }) => tasks.forEach(upsert), () => undefined);
  }, [url, upsert]);

  const cancel = useCallback(
    async (taskId: string) => {
      try {
        upsert(await postJson<Task>(`${url}/${encodeURIComponent(taskId)}/cancel`));
      } catch (error) {
        if (error instanceof ApiError && error.task) upsert(error.task); // it had finished already
        throw error;
      }
    },
    [url, upsert],
  );

  useEffect(() => {
    for (const message of messages) {
      for (const part of message.parts) if (part.type === "data-task") upsert(part.data as Task);
    }
  }, [messages, upsert]);

  return { tasks, upsert, load, cancel };
}
