// The inbox page: the token login, then the inbox. The token stays in sessionStorage (this tab only).
import { useState } from "react";
import { Inbox } from "./Inbox";
import { LoginForm } from "./LoginForm";

const KEY = "signoff.approvals-token";

export function InboxApp() {
  const [token, setToken] = useState(() => sessionStorage.getItem(KEY) ?? "");
  const [problem, setProblem] = useState("");

  function signIn(next: string) {
    sessionStorage.setItem(KEY, next);
    setProblem("");
    setToken(next);
  }

  function signOut(why: string) {
    sessionStorage.removeItem(KEY);
    setProblem(why);
    setToken("");
  }

  return (
    <>
      <header className="top">
        <h1>signoff approvals</h1>
        <nav>
          <a href="/">Chat</a>
          {token && (
            <button type="button" data-testid="logout" onClick={() => signOut("")}>
              Log out
            </button>
          )}
        </nav>
      </header>
      <main className="inbox">
        {token ? (
          <Inbox token={token} onUnauthorized={() => signOut("wrong token")} />
        ) : (
          <LoginForm problem={problem} onToken={signIn} />
        )}
      </main>
    </>
  );
}
