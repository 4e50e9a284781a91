// Acknowledged browser calls (seed 001's change_bgm): the server answers them itself, so the page only acts on
// each call as it sees it stream by, once, and sends nothing back. Calls the chat held when the page loaded
// were acted on then, by the page that saw them.
import { getToolName, type UIMessage } from "ai";
import { useEffect, useRef, useState } from "react";
import type { ChatSnapshot } from "../loadChat";
import { allTools } from "../parts";
import { acknowledgedToolNames } from "../tools";
import { BROWSER_TOOLS } from "./registry";

export function useAcknowledgedCalls(messages: UIMessage[], snapshot: ChatSnapshot): void {
  const [tools] = useState(() => acknowledgedToolNames(snapshot.tools));
  const acted = useRef(new Set(allTools(snapshot.messages).map((part) => part.toolCallId)));
  useEffect(() => {
    for (const part of allTools(messages)) {
      const tool = getToolName(part);
      if (!tools.has(tool) || acted.current.has(part.toolCallId)) continue;
      if (part.state !== "input-available" && part.state !== "output-available") continue;
      acted.current.add(part.toolCallId);
      void BROWSER_TOOLS.get(tool)?.(part.input); // what it returns is the browser's own business
    }
  }, [tools, messages]);
}
