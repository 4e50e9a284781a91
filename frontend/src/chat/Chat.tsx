// The chat: useChat over the server's conversation, live approvals and tasks, in-chat decisions and browser
// tools.
// Over SSE (POST /api/chat) by default; over the live socket (WS /api/live) with `transport` "live".
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, getToolName, type ChatTransport, type UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import { decider, requestJson, type Approval, type Principal, type WaitMode } from "../shared/api";
import { reveal } from "../shared/visible";
import { readyToSend } from "./autoSend";
import { runBrowserTool, unlockAudio } from "./browserTools";
import { Composer } from "./Composer";
import { decideInChat } from "./decideInChat";
import { LiveChatTransport, type Answer } from "./liveTransport";
import { Message } from "./Message";
import { allTools, BROWSER_TOOLS, lastStepTools, messageOf, partKey, type ToolPart } from "./parts";
import { StatusLine } from "./StatusLine";
import { taskOutput, taskView } from "./tasks";
import { ToolCard } from "./ToolCard";
import { useChatApprovals } from "./useChatApprovals";
import { useChatEvents } from "./useChatEvents";
import { useChatTasks } from "./useChatTasks";
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

export type TransportKind = "sse" | "live";

interface Props {
  snapshot: ChatSnapshot;
  /** Who this page is to the server (`GET /api/me`): whose decisions read "you". */
  me: Principal;
  /** The page's `?wait=` override; without it the server's default applies. SSE only. */
  waitOverride: WaitMode | undefined;
  transportKind: TransportKind;
}

const approvedState = (approval: Approval | undefined) =>
  approval?.state === "approved" || approval?.state === "consumed";

/** The live socket's waits are always blocking. */
export const waitMode = (kind: TransportKind, override: WaitMode | undefined, fallback: WaitMode): WaitMode =>
  kind === "live" ? "blocking" : (override ?? fallback);

export function Chat({ snapshot, me: principal, waitOverride, transportKind }: Props) {
  const chatId = snapshot.id;
  const me = principal.id;
  const mode = waitMode(transportKind, waitOverride, snapshot.wait);
  // Approvals this page answered (approved or not), to tell when another channel got there first.
  const [answered, setAnswered] = useState<ReadonlySet<string>>(new Set());
  // `toolCallId:state` of every tool part the server has seen (see autoSend.ts).
  const [seen] = useState(() => new Set(allTools(snapshot.messages).map(partKey)));
  const [transport] = useState<ChatTransport<UIMessage>>(() =>
    transportKind === "live"
      ? new LiveChatTransport()
      : new DefaultChatTransport<UIMessage>({
          api: "/api/chat",
          prepareSendMessagesRequest: ({ id, messages, body, trigger, messageId }) => {
            for (const part of allTools(messages)) seen.add(partKey(part));
            return { body: { ...body, id, messages, trigger, messageId, ...(waitOverride && { wait: waitOverride }) } };
          },
        }),
  );
  const live = transport instanceof LiveChatTransport ? transport : undefined;
  // Live: the browser calls the server handed over (`data-browser-call`), by toolCallId.
  const [handedOver, setHandedOver] = useState<ReadonlySet<string>>(new Set());
  const {
    messages,
    status,
    error,
    sendMessage,
    addToolApprovalResponse,
    addToolOutput,
    clearError,
    setMessages,
    resumeStream,
  } = useChat({
    id: chatId,
    messages: snapshot.messages,
    transport,
    // A reply that was running when the chat loaded replays in full into a new message; one that
    // continues an earlier message can't (see catchUp).
    resume: snapshot.running && !snapshot.continues,
    // Live: answers travel on the socket while the turn runs, never as a request of their own.
    sendAutomaticallyWhen: ({ messages }) => !live && readyToSend(messages, seen),
    onData: ({ type, data }) => {
      const call = (data as { toolCallId?: unknown } | undefined)?.toolCallId;
      if (type === "data-browser-call" && typeof call === "string") setHandedOver((known) => new Set(known).add(call));
    },
  });
  const latest = useRef(messages);
  latest.current = messages;
  const streaming = status === "submitted" || status === "streaming";
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

  /** Live: a page whose socket dropped (the stream ended in an error) follows the turn again, from its start;
   * the server kept it running, waiting for this answer. */
  function follow() {
    if (live && statusNow.current === "error") void resumeStream();
  }

  /** Live: answers a call of the running turn on the socket. */
  async function answer(socket: LiveChatTransport, part: ToolPart, change: Answer) {
    const message = messageOf(latest.current, part.toolCallId);
    if (message) await socket.respond(chatId, message.id, part, change);
    follow();
  }

  async function decide(part: ToolPart, approved: boolean, reason: string, remember: boolean) {
    if (part.state !== "approval-requested") return;
    const id = part.approval.id;
    const unanswer = () => setAnswered((known) => new Set([...known].filter((answered) => answered !== id)));
    setAnswered((known) => new Set(known).add(id));
    // A blocking stream is waiting on the server: deciding there is enough, the stream carries the rest.
    // Deferred: the AI SDK's own approval response; "remember" needs the server first (a session grant), and
    // so does one vote of several, which may leave the approval pending for the others.
    // Live: on the socket, mirrored into the message; "remember" is decided by the server alone, as blocking.
    const direct = remember || (approvals.get(id)?.quorum ?? 1) > 1;
    const blocking = live ? direct : mode === "blocking" && streaming;
    if (blocking || direct) {
      const body = { approved, reason, remember: remember ? ("session" as const) : ("once" as const) };
      // already decided elsewhere: the card says by whom, and the answer follows the winner
      const stands = await decideInChat(chatId, id, body, upsertApproval).catch((problem: unknown) => {
        unanswer(); // refused: the card still asks, or waits for the others
        throw problem;
      });
      if (stands.state === "pending") {
        unanswer(); // one vote of several: the others decide it, and the chat's events bring that here
        return follow();
      }
      approved = approvedState(stands);
      reason = stands.decision?.reason || stands.closed?.reason || "";
      if (blocking) return follow();
    }
    const response = { id, approved, reason: reason || undefined };
    if (live) await answer(live, part, { state: "approval-responded", approval: response });
    await addToolApprovalResponse(response);
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
  // Live: the turn goes on instead, waiting for the result on the socket, and a data chunk hands it over.
  const started = useRef(new Set<string>());
  useEffect(() => {
    if (live || status !== "ready") return;
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
  }, [live, status, messages, addToolOutput]);

  useEffect(() => {
    if (!live) return;
    const settled = (part: ToolPart | undefined) =>
      part?.state === "output-available" || part?.state === "output-error";
    for (const part of allTools(messages)) {
      if (!handedOver.has(part.toolCallId) || started.current.has(part.toolCallId)) continue;
      started.current.add(part.toolCallId);
      if (settled(part)) continue; // a resumed turn replays calls it already has results for
      const tool = getToolName(part);
      void runBrowserTool(tool, part.input).then(async (result) => {
        // the replay may bring the result while this browser still works on it: one result per call
        if (settled(allTools(latest.current).find((known) => known.toolCallId === part.toolCallId))) return;
        const change: Answer =
          "output" in result
            ? { state: "output-available", output: result.output }
            : { state: "output-error", errorText: result.errorText };
        await answer(live, part, change);
        await addToolOutput({ tool, toolCallId: part.toolCallId, ...change });
      });
    }
  }, [live, handedOver, messages, addToolOutput]);

  function send(text: string) {
    unlockAudio();
    void sendMessage({ text });
  }

  const renderTool = (part: ToolPart) => {
    const approval = "approval" in part && part.approval ? approvals.get(part.approval.id) : undefined;
    const lost = approval && answered.has(approval.id) && approval.state !== "pending" && decider(approval).id !== me;
    const output = taskOutput(part);
    return (
      <ToolCard
        part={part}
        approval={approval}
        me={me}
        conflict={lost ? `your answer came too late: already decided by ${reveal(decider(approval).name)}` : undefined}
        onDecide={(approved, reason, remember) => decide(part, approved, reason, remember)}
        task={output && taskView(output, tasks.tasks.get(output.task_id))}
        onCancelTask={tasks.cancel}
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
