// The chat page (/). The chat id lives in the URL (?chat=), so a reload keeps the conversation; ?wait=
// chooses blocking or deferred approvals for this page instead of the server's default; ?transport=live
// talks over the live socket (WS /api/live, always blocking) instead of SSE.
import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import type { WaitMode } from "../shared/api";
import type { TransportKind } from "./Chat";
import { ChatApp } from "./ChatApp";
import "../shared/style.css";

const params = new URLSearchParams(location.search);
let chatId = params.get("chat");
if (!chatId) {
  chatId = `chat-${crypto.randomUUID()}`;
  params.set("chat", chatId);
  history.replaceState(null, "", `${location.pathname}?${params}`);
}
const wait = params.get("wait");
const waitOverride: WaitMode | undefined = wait === "blocking" || wait === "deferred" ? wait : undefined;
const transportKind: TransportKind = params.get("transport") === "live" ? "live" : "sse";

createRoot(document.getElementById("root") as HTMLElement).render(
  <StrictMode>
    <ChatApp chatId={chatId} waitOverride={waitOverride} transportKind={transportKind} />
  </StrictMode>,
);
