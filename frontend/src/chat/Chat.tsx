// The chat: useChat over the server's conversation, live approvals, in-chat decisions and browser tools.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, getToolName, type UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import { ApiError, decidedBy, requestJson, type Approval, type WaitMode } from "../shared/api";
import { readyToSend } from "./autoSend";
import { runBrowserTool, unlockAudio } from "./browserTools";
import { Composer } from "./Composer";
import { Message } from "./Message";
import { allTools, BROWSER_TOOLS, lastStepTools, partKey, type ToolPart } from "./parts";
import { StatusLine } from "./StatusLine";
import { ToolCard } from "./ToolCard";
import { useChatApprovals } from "./useChatApprovals";
import { useStickToBottom } from "./useStickToBottom";

export interface ChatSnapshot {
  id: string;
  wait: WaitMode;
  /** A reply was running when the chat loaded; `messages` are the chat as it began. */
  running: boolean;
  /** That reply continues the last assistant message (it opens with results of earlier calls). */
  continues: boolean;
  messages: UIMessage[];
  approvals: Approval[];
}

interface Props {
  snapshot: ChatSnapshot;
  /** The page's `?wait=` override; without it the server's default applies. */
  waitOverride: WaitMode | undefined;
}

const approvedState = (approval: Approval | undefined) =>
  approval?.state === "approved" || approval?.state === "consumed";

export function Chat({ snapshot, waitOverride }: Props) {
  const chatId = snapshot.id;
  const me = `chat:${chatId}`;
  const mode = waitOverride ?? snapshot.wait;
  // Approvals this page answered (approved or not), to tell when another channel got there first.
  const [answered, setAnswered] = useState<ReadonlySet<string>>(new Set());
  // `toolCallId:state` of every tool part the server has seen (see autoSend.ts).
  const [seen] = useState(() => new Set(allTools(snapshot.messages).map(partKey)));
  const [transport] = useState(
    () =>
      new DefaultChatTransport<UIMessage>({
        api: "/api/chat",
        prepareSendMessagesRequest: ({ id, messages, body, trigger, messageId }) => {
          for (const part of allTools(messages)) seen.add(partKey(part));
          return { body: { ...body, id, messages, trigger, messageId, ...(waitOverride && { wait: waitOverride }) } };
        },
      }),
  );
  const {
    messages,
    status,
    error,
    sendMessage,
    addToolApprovalResponse,
    addToolOutput,
    clearError,
    setMessages,
  } = useChat({
    id: chatId,
    messages: snapshot.messages,
    transport,
    // A reply that was running when the chat loaded replays in full into a new message; one that
    // continues an earlier message can't (see catchUp).
    resume: snapshot.running && !snapshot.continues,
    sendAutomaticallyWhen: ({ messages }) => readyToSend(messages, seen),
  });
  const streaming = status === "submitted" || status === "streaming";
  const statusNow = useRef(status);
  statusNow.current = status;
  // A reply the server started itself (a browser call timed out) continues the last message.
  const [approvals, upsertApproval] = useChatApprovals(chatId, snapshot.approvals, () => {
    if (statusNow.current === "ready") void catchUp();
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
      for (const part of allTools(fresh.messages)) seen.add(partKey(part));
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
  useStickToBottom();

  async function decide(part: ToolPart, approved: boolean, reason: string, remember: boolean) {
    if (part.state !== "approval-requested") return;
    const id = part.approval.id;
    setAnswered((known) => new Set(known).add(id));
    // A blocking stream is waiting on the server: deciding there is enough, the stream carries the rest.
    // Deferred: the AI SDK's own approval response; "remember" needs the server first (a session grant).
    const blocking = mode === "blocking" && streaming;
    if (blocking || remember) {
      try {
        const url = `/api/chat/${encodeURIComponent(chatId)}/approvals/${encodeURIComponent(id)}`;
        const body = { approved, reason, remember: remember ? "session" : "once" };
        upsertApproval(await requestJson<Approval>(url, { method: "POST", body: JSON.stringify(body) }));
      } catch (problem) {
        if (!(problem instanceof ApiError && problem.approval)) throw problem;
        upsertApproval(problem.approval); // already decided: the card says by whom and follows the winner
        approved = approvedState(problem.approval);
        reason = problem.approval.decision?.reason || problem.approval.closed?.reason || "";
      }
      if (blocking) return;
    }
    await addToolApprovalResponse({ id, approved, reason: reason || undefined });
  }

  // Deferred: an approval decided elsewhere (the inbox, the CLI, a deadline) answers the card here too, so
  // the reply goes on by itself. A blocking stream carries those decisions already.
  const mirrored = useRef(new Set<string>());
  useEffect(() => {
    if (mode !== "deferred") return;
    for (const part of allTools(messages)) {
      if (part.state !== "approval-requested") continue;
      const approval = approvals.get(part.approval.id);
      if (!approval || approval.state === "pending" || answered.has(approval.id)) continue;
      if (mirrored.current.has(approval.id)) continue;
      mirrored.current.add(approval.id);
      const reason = approval.decision?.reason || approval.closed?.reason || approval.state;
      void addToolApprovalResponse({ id: approval.id, approved: approvedState(approval), reason });
    }
  }, [mode, messages, approvals, answered, addToolApprovalResponse]);

  // Browser tools run once each, when the server hands them over: it streams `tool-input-available` for a
  // browser call once it may run (at once, or after its approval), and the reply ends there.
  const started = useRef(new Set<string>());
  useEffect(() => {
    if (status !== "ready") return;
    for (const part of lastStepTools(messages)) {
      const tool = getToolName(part);
      const runnable = part.state === "input-available";
      if (!BROWSER_TOOLS.has(tool) || !runnable || started.current.has(part.toolCallId)) continue;
      started.current.add(part.toolCallId);
      void runBrowserTool(tool, part.input).then((result) =>
        "output" in result
          ? addToolOutput({ tool, toolCallId: part.toolCallId, output: result.output })
          : addToolOutput({ state: "output-error", tool, toolCallId: part.toolCallId, errorText: result.errorText }),
      );
    }
  }, [status, messages, addToolOutput]);

  function send(text: string) {
    unlockAudio();
    void sendMessage({ text });
  }

  const renderTool = (part: ToolPart) => {
    const approval = "approval" in part && part.approval ? approvals.get(part.approval.id) : undefined;
    const lost = approval && answered.has(approval.id) && approval.state !== "pending" && decidedBy(approval) !== me;
    return (
      <ToolCard
        part={part}
        approval={approval}
        me={me}
        conflict={lost ? `your answer came too late: already decided by ${decidedBy(approval)}` : undefined}
        onDecide={(approved, reason, remember) => decide(part, approved, reason, remember)}
      />
    );
  };

  return (
    <>
      <ol className="messages" aria-label="Conversation">
        {messages.map((message) => (
          <Message key={message.id} message={message} renderTool={renderTool} />
        ))}
      </ol>
      <StatusLine
        status={catchingUp ? "streaming" : status}
        error={error}
        tools={lastStepTools(messages)}
        approvals={approvals}
        onDismiss={clearError}
      />
      <Composer busy={streaming || catchingUp} onSend={send} />
    </>
  );
}
