// The chat over SSE (POST /api/chat), whichever the wait mode: each request streams one reply, and the page
// sends the next by itself once the last step's calls are settled on its side (see autoSend.ts).
import { DefaultChatTransport, getToolName, type UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import type { WaitMode } from "../shared/api";
import { readyToSend } from "./autoSend";
import { answerBrowserCall, handedOver } from "./browser/dispatch";
import { BROWSER_TOOLS } from "./browser/registry";
import type { ChatSnapshot } from "./loadChat";
import { allTools, lastStepTools, partKey } from "./parts";
import { browserToolNames } from "./tools";
import { useChatSession, type ChatSession } from "./useChatSession";

/** `waitOverride`: the page's `?wait=`, sent with every request; without it the server's default applies. */
export function useSseChat(snapshot: ChatSnapshot, waitOverride: WaitMode | undefined): ChatSession {
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
  const session = useChatSession(snapshot, {
    transport,
    sendAutomaticallyWhen: ({ messages }) => readyToSend(messages, seen),
    caughtUp: (messages) => {
      for (const part of allTools(messages)) seen.add(partKey(part));
    },
  });
  useBrowserCalls(session, snapshot);
  return session;
}

/** Runs each browser call once, when the server hands it over; its answer settles the step, which sends the
 * next request. */
function useBrowserCalls({ status, messages, addToolOutput }: ChatSession, snapshot: ChatSnapshot): void {
  const [browser] = useState(() => browserToolNames(snapshot.tools));
  const started = useRef(new Set<string>());
  useEffect(() => {
    if (status !== "ready") return;
    for (const part of lastStepTools(messages)) {
      if (!handedOver(browser, part) || started.current.has(part.toolCallId)) continue;
      started.current.add(part.toolCallId);
      const tool = getToolName(part);
      void answerBrowserCall(BROWSER_TOOLS, part).then((answer) =>
        addToolOutput({ tool, toolCallId: part.toolCallId, ...answer }),
      );
    }
  }, [browser, status, messages, addToolOutput]);
}
