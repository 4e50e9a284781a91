// The chat as every transport has it: useChat over the server's conversation, the chat's approvals and tasks
// kept live from its events, and a catch-up for a reply the AI SDK can't replay.
import { useChat } from "@ai-sdk/react";
import type { ChatInit, ChatTransport, UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import { requestJson } from "../shared/api";
import { useAcknowledgedCalls } from "./browser/acknowledged";
import type { ChatSnapshot } from "./loadChat";
import { useChatApprovals } from "./useChatApprovals";
import { useChatEvents } from "./useChatEvents";
import { useChatTasks } from "./useChatTasks";

export interface SessionOptions extends Pick<ChatInit<UIMessage>, "sendAutomaticallyWhen" | "onData"> {
  transport: ChatTransport<UIMessage>;
  /** The page took the chat from the server again: `messages` are as the server holds them. */
  caughtUp?: (messages: UIMessage[]) => void;
}

export type ChatSession = ReturnType<typeof useChatSession>;

export function useChatSession(
  snapshot: ChatSnapshot,
  { transport, sendAutomaticallyWhen, onData, caughtUp }: SessionOptions,
) {
  const chatId = snapshot.id;
  const chat = useChat({
    id: chatId,
    messages: snapshot.messages,
    transport,
    // A reply that was running when the chat loaded replays in full into a new message; one that
    // continues an earlier message can't (see catchUp).
    resume: snapshot.running && !snapshot.continues,
    sendAutomaticallyWhen,
    onData,
  });
  const { messages, status, setMessages } = chat;
  useAcknowledgedCalls(messages, snapshot);
  // for answers that land after the render that started them
  const latest = useRef(messages);
  latest.current = messages;
  const statusNow = useRef(status);
  statusNow.current = status;
  const [approvals, upsertApproval] = useChatApprovals(snapshot.approvals);
  const tasks = useChatTasks(chatId, messages);
  useChatEvents(chatId, {
    open: tasks.load,
    approval: upsertApproval,
    task: tasks.upsert,
    // A reply the server started itself (a browser call timed out) continues the last message.
    reply: () => {
      if (statusNow.current === "ready") void catchUp();
    },
  });

  // The AI SDK (6.0.x) resumes a stream into a fresh message, so the replay of a reply that continues an
  // earlier message, which opens with results for that message's calls, can't be applied ("no tool
  // invocation found"). For such a reply the page waits for its end, then takes the chat from the server.
  const [catchingUp, setCatchingUp] = useState(false);
  async function catchUp() {
    setCatchingUp(true);
    try {
      const url = `/api/chat/${encodeURIComponent(chatId)}`;
      await (await fetch(`${url}/stream`)).text();
      const fresh = await requestJson<ChatSnapshot>(url);
      caughtUp?.(fresh.messages);
      setMessages(fresh.messages);
      fresh.approvals.forEach(upsertApproval);
    } finally {
      setCatchingUp(false);
    }
  }
  const caughtUpOnLoad = useRef(false);
  useEffect(() => {
    if (caughtUpOnLoad.current || !snapshot.running || !snapshot.continues) return;
    caughtUpOnLoad.current = true;
    void catchUp();
  });

  const streaming = status === "submitted" || status === "streaming";
  return { ...chat, chatId, latest, statusNow, streaming, approvals, upsertApproval, tasks, catchingUp };
}
