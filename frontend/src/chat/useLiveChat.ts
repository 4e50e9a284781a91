// The chat over the live socket (WS /api/live, see liveTransport.ts). Waits are always blocking: a turn stays
// open while a call waits for a person or for this browser, so every answer travels on the socket while the
// turn runs, never as a request of its own, and is mirrored into useChat's message.
import { getToolName } from "ai";
import { useEffect, useRef, useState } from "react";
import { answerBrowserCall } from "./browser/dispatch";
import { BROWSER_TOOLS } from "./browser/registry";
import type { ChatMode } from "./Chat";
import { LiveChatTransport, type Answer } from "./liveTransport";
import type { ChatSnapshot } from "./loadChat";
import { allTools, messageOf, type ToolPart } from "./parts";
import { useChatSession } from "./useChatSession";
import { useDecisions } from "./useDecisions";

const settled = (part: ToolPart | undefined) => part?.state === "output-available" || part?.state === "output-error";

export function useLiveChat(snapshot: ChatSnapshot): ChatMode {
  const [transport] = useState(() => new LiveChatTransport());
  // The browser calls the server handed over (`data-browser-call`), by toolCallId.
  const [handedOver, setHandedOver] = useState<ReadonlySet<string>>(new Set());
  const session = useChatSession(snapshot, {
    transport,
    onData: ({ type, data }) => {
      const call = (data as { toolCallId?: unknown } | undefined)?.toolCallId;
      if (type === "data-browser-call" && typeof call === "string") setHandedOver((known) => new Set(known).add(call));
    },
  });
  const { chatId, latest, statusNow, resumeStream, messages, addToolOutput, addToolApprovalResponse } = session;

  /** A page whose socket dropped (the stream ended in an error) follows the turn again, from its start; the
   * server kept it running, waiting for this answer. */
  function follow() {
    if (statusNow.current === "error") void resumeStream();
  }

  /** Answers a call of the running turn on the socket. */
  async function answer(part: ToolPart, change: Answer) {
    const message = messageOf(latest.current, part.toolCallId);
    if (message) await transport.respond(chatId, message.id, part, change);
    follow();
  }

  const decisions = useDecisions(session, {
    // "remember" and votes are decided by the server alone, as blocking
    serverAlone: (direct) => direct,
    respond: async (part, response) => {
      await answer(part, { state: "approval-responded", approval: response });
      await addToolApprovalResponse(response);
    },
    settled: follow,
  });

  const started = useRef(new Set<string>());
  useEffect(() => {
    for (const part of allTools(messages)) {
      if (!handedOver.has(part.toolCallId) || started.current.has(part.toolCallId)) continue;
      started.current.add(part.toolCallId);
      if (settled(part)) continue; // a resumed turn replays calls it already has results for
      const tool = getToolName(part);
      void answerBrowserCall(BROWSER_TOOLS, part).then(async (change) => {
        // the replay may bring the result while this browser still works on it: one result per call
        if (settled(allTools(latest.current).find((known) => known.toolCallId === part.toolCallId))) return;
        await answer(part, change);
        await addToolOutput({ tool, toolCallId: part.toolCallId, ...change });
      });
    }
  }, [handedOver, messages, addToolOutput]);

  return { session, decisions };
}
