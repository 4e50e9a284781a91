// The chat over the live socket (WS /api/live, see liveTransport.ts), answered the AI SDK's own way: a card's
// decision is `addToolApprovalResponse`, a browser tool's result `addToolOutput`, and `sendAutomaticallyWhen`
// sends them once the turn's stream paused for them, as an ordinary request on the socket. "Remember for this
// chat" and votes are the server's decision alone (POST /api/chat/{id}/approvals/{approval_id}), like a
// decision made in the inbox: the turn moves on while its stream is paused, the transport queues what comes,
// and the page follows the turn with `resumeStream`. A socket that closes under a turn (its worker stopped or
// died) is opened again by the transport, which follows the turn there; meanwhile the status line says so.
import {
  getToolName,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
  type UIMessage,
} from "ai";
import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import type { Approval } from "../shared/api";
import { answerBrowserCall, type BrowserAnswer } from "./browser/dispatch";
import { BROWSER_TOOLS } from "./browser/registry";
import type { ChatMode } from "./Chat";
import { LiveChatTransport } from "./liveTransport";
import type { ChatSnapshot } from "./loadChat";
import { allTools, lastStepTools, type ToolPart } from "./parts";
import { browserToolNames } from "./tools";
import { useChatSession } from "./useChatSession";
import { approvedState, useDecisions, type ApprovalResponse } from "./useDecisions";

/** When useChat sends the page's answers (`sendAutomaticallyWhen`): the AI SDK's two predicates (both read the
 * tool parts after the last `step-start`), except that
 * - a browser call approved in the page waits for its output, so that the approval and the output travel in
 *   one message (approve-and-run);
 * - a step whose calls all have outputs is sent only while a turn runs: after its `[DONE]` they are the
 *   server's own results, not answers. */
export function readyToAnswer(messages: UIMessage[], browser: ReadonlySet<string>, turnOpen: boolean): boolean {
  const running = lastStepTools(messages).some(
    (part) => part.state === "approval-responded" && part.approval.approved && browser.has(getToolName(part)),
  );
  return (
    (turnOpen && lastAssistantMessageIsCompleteWithToolCalls({ messages })) ||
    (lastAssistantMessageIsCompleteWithApprovalResponses({ messages }) && !running)
  );
}

/** What the page answered for one call. */
interface Given {
  approval?: ApprovalResponse;
  output?: BrowserAnswer;
}

const pending = (approval: Approval | undefined) => (approval?.state ?? "pending") === "pending";

export function useLiveChat(snapshot: ChatSnapshot): ChatMode {
  const [browser] = useState(() => browserToolNames(snapshot.tools));
  const follow = useRef(() => {});
  const reopened = useRef(() => {});
  const stale = useRef(() => {});
  const [transport] = useState(
    () =>
      new LiveChatTransport({
        onQueued: () => follow.current(),
        onReopened: () => reopened.current(),
        onStale: () => stale.current(),
      }),
  );
  const turnOpen = useSyncExternalStore(transport.subscribe, () => transport.turnOpen);
  const trouble = useSyncExternalStore(transport.subscribe, () => transport.trouble);
  const troubleError = useMemo(() => (trouble === undefined ? undefined : new Error(trouble)), [trouble]);
  // The browser calls the server handed over (`data-browser-call`), by toolCallId.
  const [handedOver, setHandedOver] = useState<ReadonlySet<string>>(new Set());
  const session = useChatSession(snapshot, {
    transport,
    sendAutomaticallyWhen: ({ messages }) => readyToAnswer(messages, browser, transport.turnOpen),
    onData: ({ type, data }) => {
      const call = (data as { toolCallId?: unknown } | undefined)?.toolCallId;
      if (type === "data-browser-call" && typeof call === "string") setHandedOver((known) => new Set(known).add(call));
    },
  });
  const { latest, statusNow, status, messages, approvals, resumeStream, addToolOutput, addToolApprovalResponse } =
    session;
  // The turn moved on while its stream was paused: follow it.
  follow.current = () => {
    if (transport.queued) void resumeStream();
  };
  // A new socket follows the turn its last one lost: the error the lost one ended its stream with is over.
  reopened.current = () => {
    if (statusNow.current === "error") session.clearError();
  };
  // Followed again, the turn had nothing new: the chat as the server holds it may have gone on meanwhile.
  stale.current = () => void session.takeFromServer().catch(() => undefined);
  /** The turn waits on the page: its stream paused, or ended in an error (a refused answer, a closed socket). */
  const paused = turnOpen && (status === "ready" || status === "error");

  const now = (toolCallId: string) => allTools(latest.current).find((part) => part.toolCallId === toolCallId);
  // Whose answers the page gave, until the server took them: a mid-turn resume replays the turn as the server
  // streamed it, which drops answers not sent yet (one approval of two, say); they are given again.
  const given = useRef(new Map<string, Given>());
  const giving = useRef(new Set<string>());
  async function give(part: ToolPart, answer: Given): Promise<void> {
    const id = part.toolCallId;
    given.current.set(id, { ...given.current.get(id), ...answer });
    giving.current.add(id);
    try {
      if (answer.approval) await addToolApprovalResponse(answer.approval);
      if (answer.output) await addToolOutput({ tool: getToolName(part), toolCallId: id, ...answer.output });
    } finally {
      giving.current.delete(id);
    }
  }

  // Each browser call runs once in this page.
  const started = useRef(new Set<string>());
  function run(part: ToolPart): Promise<BrowserAnswer> | undefined {
    if (started.current.has(part.toolCallId)) return undefined;
    started.current.add(part.toolCallId);
    return answerBrowserCall(BROWSER_TOOLS, part);
  }

  const decisions = useDecisions(session, {
    // "remember" and votes are decided by the server alone, as blocking, and so is every card while the page
    // follows a cut reply over SSE (see useChatSession's recover)
    serverAlone: (direct) => direct || session.catchingUp,
    respond: async (part, approval) => {
      // An approved browser call runs first, so its approval and its output go in one message.
      const running = approval.approved && browser.has(getToolName(part)) ? run(part) : undefined;
      const output = await running;
      if (now(part.toolCallId)?.state !== "approval-requested") return; // the turn went on without this answer
      await give(part, { approval, output });
    },
  });

  // A browser call the server waits for without asking this page: handed over (`data-browser-call`; approved
  // elsewhere, say), or asking nobody at a pause, where every open call waits on a person or on this browser.
  useEffect(() => {
    const step = new Set(lastStepTools(messages));
    for (const part of allTools(messages)) {
      if (!browser.has(getToolName(part)) || started.current.has(part.toolCallId)) continue;
      const waiting = paused && step.has(part) && part.state === "input-available";
      if (!handedOver.has(part.toolCallId) && !waiting) continue;
      if (part.state !== "input-available" && part.state !== "approval-requested") continue; // it has its result
      void run(part)?.then(async (output) => {
        // the turn may have brought its result meanwhile (a timeout, a replay): one result per call
        const state = now(part.toolCallId)?.state;
        if (state === "input-available" || state === "approval-requested") await give(part, { output });
      });
    }
  }, [browser, handedOver, paused, messages]);

  // Answers a mid-turn resume dropped, given again while the turn waits for them.
  useEffect(() => {
    if (!paused) return;
    for (const part of lastStepTools(messages)) {
      const mine = given.current.get(part.toolCallId);
      if (mine === undefined || giving.current.has(part.toolCallId)) continue;
      if (part.state === "approval-requested") {
        const approval = approvals.get(part.approval.id);
        if (mine.approval?.id === part.approval.id && pending(approval)) void give(part, mine);
        else if (!mine.approval && mine.output && approvedState(approval)) void give(part, { output: mine.output });
      } else if (part.state === "input-available" && mine.output) void give(part, { output: mine.output });
    }
  }, [paused, messages, approvals]);

  // A decision made elsewhere (the inbox, "remember", a deadline) for a call of a step this page holds answers
  // for: useChat sends a step once every call of it is answered, and the server may stream the decided call's
  // result only with the others' (ADK), so the page answers that card as it was decided (the server takes it
  // as the echo of a decided approval). Without answers of its own the page leaves it to the server, which
  // moves the turn on alone. An approved browser call is answered by its output instead (see above).
  useEffect(() => {
    if (!paused) return;
    const step = lastStepTools(messages);
    const holds = step.some(
      (part) =>
        part.state === "approval-responded" ||
        ((part.state === "output-available" || part.state === "output-error") && transport.awaits(part.toolCallId)),
    );
    if (!holds) return;
    for (const part of step) {
      if (part.state !== "approval-requested" || giving.current.has(part.toolCallId)) continue;
      const approval = approvals.get(part.approval.id);
      if (approval === undefined || pending(approval)) continue;
      const approved = approvedState(approval);
      if (approved && browser.has(getToolName(part))) continue;
      const reason = approval.decision?.reason || approval.closed?.reason || approval.state;
      void give(part, { approval: { id: approval.id, approved, reason } });
    }
  }, [browser, paused, messages, approvals, transport]);

  // While a turn runs the composer waits, paused or not (the server refuses a new message meanwhile).
  const shown = {
    ...session,
    streaming: session.streaming || turnOpen,
    status: turnOpen && status === "ready" ? ("streaming" as const) : status,
    error: troubleError ?? session.error,
  };
  return { session: shown, decisions };
}
