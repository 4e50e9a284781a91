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

/** Follows of a cut reply the page tries (each waits as long as the reply does) before it shows the chat as
 * the server last said. */
const RECOVER_TRIES = 8;

export function useChatSession(
  snapshot: ChatSnapshot,
  { transport, sendAutomaticallyWhen, onData, caughtUp }: SessionOptions,
) {
  const chatId = snapshot.id;
  const url = `/api/chat/${encodeURIComponent(chatId)}`;
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
  // The feed of changes a reopened event stream follows missed those made while it was away (its worker
  // died, say): the chat's approvals as they stand now come first.
  const eventsOpened = useRef(false);
  useChatEvents(chatId, {
    open: () => {
      tasks.load();
      if (eventsOpened.current) void refreshApprovals();
      eventsOpened.current = true;
    },
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
  async function refreshApprovals(): Promise<void> {
    const fresh = await requestJson<ChatSnapshot>(url).catch(() => undefined);
    fresh?.approvals.forEach(upsertApproval);
  }
  /** The chat as the server holds it now, in place of the page's; whether a reply still runs. */
  async function takeFromServer(): Promise<boolean> {
    const fresh = await requestJson<ChatSnapshot>(url);
    caughtUp?.(fresh.messages);
    setMessages(fresh.messages);
    fresh.approvals.forEach(upsertApproval);
    return fresh.running;
  }
  async function catchUp() {
    setCatchingUp(true);
    try {
      await (await fetch(`${url}/stream`)).text();
      await takeFromServer();
    } finally {
      setCatchingUp(false);
    }
  }
  // A reply cut under the page (its worker stopped, or died) goes on in the server, on any worker: the page
  // follows it again at /stream, through whichever worker answers, to its end (the server continues a cut
  // blocking reply there), then takes the chat from the server. A follow the network cut is tried again. A
  // page that loads a chat so cut (`cut`) follows it the same way.
  const recovering = useRef(false);
  async function recover() {
    if (recovering.current) return;
    recovering.current = true;
    setCatchingUp(true);
    try {
      for (let attempt = 0; attempt < RECOVER_TRIES; attempt += 1) {
        try {
          await (await fetch(`${url}/stream`)).text();
          if (!(await takeFromServer())) break;
        } catch {
          await new Promise((wake) => setTimeout(wake, Math.min(500 * 2 ** attempt, 5_000)));
        }
      }
      if (statusNow.current === "error") chat.clearError();
    } finally {
      recovering.current = false;
      setCatchingUp(false);
    }
  }
  const caughtUpOnLoad = useRef(false);
  useEffect(() => {
    if (caughtUpOnLoad.current) return;
    if (snapshot.running && snapshot.continues) void catchUp();
    else if (snapshot.cut) void recover();
    else return;
    caughtUpOnLoad.current = true;
  });

  const streaming = status === "submitted" || status === "streaming";
  return {
    ...chat,
    chatId,
    latest,
    statusNow,
    streaming,
    approvals,
    upsertApproval,
    tasks,
    catchingUp,
    recover,
    takeFromServer,
  };
}
