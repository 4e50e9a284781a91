// Loads the conversation as the server stored it (GET /api/chat/{id}), then shows the chat. Loading first
// means a reload shows everything again: the messages, pending approvals and a reply still running.
import { useEffect, useState } from "react";
import { requestJson, type WaitMode } from "../shared/api";
import { Chat, waitMode, type ChatSnapshot, type TransportKind } from "./Chat";

interface Props {
  chatId: string;
  waitOverride: WaitMode | undefined;
  transportKind: TransportKind;
}

export function ChatApp({ chatId, waitOverride, transportKind }: Props) {
  const [snapshot, setSnapshot] = useState<ChatSnapshot>();
  const [problem, setProblem] = useState("");

  useEffect(() => {
    requestJson<ChatSnapshot>(`/api/chat/${encodeURIComponent(chatId)}`).then(setSnapshot, (error: Error) =>
      setProblem(error.message),
    );
  }, [chatId]);

  const mode = snapshot && waitMode(transportKind, waitOverride, snapshot.wait);
  return (
    <>
      <header className="top">
        <h1>signoff</h1>
        <p className="chat-id">
          chat <code data-testid="chat-id">{chatId}</code>
          {mode && (
            <>
              {" · "}
              <span data-testid="wait-mode">{mode}</span> approvals over{" "}
              <span data-testid="transport">{transportKind === "live" ? "live" : "SSE"}</span>
            </>
          )}
        </p>
        <nav>
          <a href="/approvals">Approvals inbox</a>
        </nav>
      </header>
      <main className="chat">
        {snapshot ? (
          <Chat snapshot={snapshot} waitOverride={waitOverride} transportKind={transportKind} />
        ) : (
          <p role="status" aria-live="polite">
            {problem ? `Could not load the chat: ${problem}` : "Loading the chat…"}
          </p>
        )}
      </main>
    </>
  );
}
