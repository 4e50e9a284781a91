// The inbox page: the token login, then the inbox, as the principal the token names (GET /api/me). The token
// stays in sessionStorage (this tab only); a reload asks the server again who it names.
import { useEffect, useState } from "react";
import { ApiError, fetchMe, type Principal } from "../shared/api";
import { reveal } from "../shared/visible";
import { Inbox } from "./Inbox";
import { LoginForm } from "./LoginForm";

const KEY = "signoff.approvals-token";

export function InboxApp() {
  const [token, setToken] = useState(() => sessionStorage.getItem(KEY) ?? "");
  const [me, setMe] = useState<Principal>();
  const [problem, setProblem] = useState("");

  function signIn(next: string, principal: Principal) {
    sessionStorage.setItem(KEY, next);
    setProblem("");
    setMe(principal);
    setToken(next);
  }

  function signOut(why: string) {
    sessionStorage.removeItem(KEY);
    setProblem(why);
    setMe(undefined);
    setToken("");
  }

  useEffect(() => {
    if (!token || me) return;
    fetchMe(`Bearer ${token}`).then(setMe, (error: Error) =>
      signOut(error instanceof ApiError && error.status === 401 ? "wrong token" : error.message),
    );
  }, [token, me]);

  // who is signed in gives way on a phone (style.css, .top-inbox): the header stays one line, and says it whole
  // when pointed at
  const roles = me && me.roles.length > 0 ? ` (${me.roles.map(reveal).join(", ")})` : "";
  return (
    <>
      <header className="top top-inbox">
        <h1>signoff approvals</h1>
        <nav>
          <a href="/">Chat</a>
          {me && (
            <span className="whoami" data-testid="whoami" title={`Signed in as ${reveal(me.name)}${roles}`}>
              <span className="whoami-more">Signed in as </span>
              {reveal(me.name)}
              <span className="whoami-more">{roles}</span>
            </span>
          )}
          {token && (
            <button type="button" data-testid="logout" onClick={() => signOut("")}>
              Log out
            </button>
          )}
        </nav>
      </header>
      <main className="inbox">
        {!token ? (
          <LoginForm problem={problem} onSignIn={signIn} />
        ) : me ? (
          <Inbox token={token} me={me} onUnauthorized={() => signOut("wrong token")} />
        ) : (
          <p role="status">Checking the token…</p>
        )}
      </main>
    </>
  );
}
