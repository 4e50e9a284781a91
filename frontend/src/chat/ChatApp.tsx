// Loads the conversation as the server stored it (GET /api/chat/{id}) and who this page is (GET /api/me),
// then shows the chat. Loading first means a reload shows everything again: the messages, pending approvals
// and a reply still running.
import { useEffect, useState } from "react";
import { ApiError, type WaitMode } from "../shared/api";
import { SignIn } from "../shared/SignIn";
import { reveal } from "../shared/visible";
import { Chat, waitMode, type TransportKind } from "./Chat";
import { loadChat, notYours, type LoadedChat } from "./loadChat";

interface Props {
  chatId: string;
  waitOverride: WaitMode | undefined;
  transportKind: TransportKind;
}

export function ChatApp({ chatId, waitOverride, transportKind }: Props) {
  const [loaded, setLoaded] = useState<LoadedChat>();
  const [problem, setProblem] = useState<unknown>();

  useEffect(() => {
    loadChat(chatId).then(setLoaded, (error: unknown) => setProblem(() => error ?? "no answer"));
  }, [chatId]);

  const mode = loaded && waitMode(transportKind, waitOverride, loaded.snapshot.wait);
  return (
    <>
      <header className="top">
        <h1>signoff</h1>
        <p className="chat-id">
          chat <code data-testid="chat-id">{chatId}</code>
          {loaded && (
            <>
              {" · you are "}
              <span data-testid="me">{reveal(loaded.me.name)}</span>
            </>
          )}
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
        {loaded ? (
          <Chat snapshot={loaded.snapshot} me={loaded.me} waitOverride={waitOverride} transportKind={transportKind} />
        ) : problem === undefined ? (
          <p role="status" aria-live="polite">
            Loading the chat…
          </p>
        ) : problem instanceof ApiError && problem.status === 401 ? (
          <SignIn reason="This server talks only with someone signed in." onSignedIn={() => location.reload()} />
        ) : (
          <Unavailable problem={problem} />
        )}
      </main>
    </>
  );
}

function Unavailable({ problem }: { problem: unknown }) {
  const message = problem instanceof Error ? problem.message : String(problem);
  return (
    <div className="unavailable" role="alert" data-testid="load-problem">
      <p>
        {notYours(problem)
          ? "This chat belongs to someone else: only the person who started it can see it."
          : `Could not load the chat: ${message}`}
      </p>
      <p>
        <a href="/" data-testid="new-chat">
          Start a new chat
        </a>
      </p>
    </div>
  );
}
