// Sign in on this page: with an API token (a personal one from `signoff principals add`, or the admin's), or
// at the OIDC issuer the server names. Either way the server answers with a login cookie (HttpOnly: no script
// here ever holds the token), so the chat, its live socket and the inbox all go on as that principal.
import { useEffect, useState, type FormEvent } from "react";
import { ApiError, postJson, requestJson, type Principal } from "./api";

/** GET /api/session: who this page is, and how one may sign in here. */
interface Session {
  principal: Principal | null;
  sign_in: { token: boolean; oidc?: { issuer: string; login: string } };
}

interface Props {
  /** Why the page asks: what could not be done without signing in. */
  reason: string;
  onSignedIn: (me: Principal) => void;
}

export function SignIn({ reason, onSignedIn }: Props) {
  const [session, setSession] = useState<Session>();
  const [token, setToken] = useState("");
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState("");

  useEffect(() => {
    requestJson<Session>("/api/session").then(setSession, (failure: unknown) => setError(String(failure)));
  }, []);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setChecking(true);
    setError("");
    try {
      onSignedIn(await postJson<Principal>("/api/session", { token }));
    } catch (failure) {
      setError(failure instanceof ApiError && failure.status === 401 ? "wrong token" : String(failure));
      setChecking(false);
    }
  }

  const oidc = session?.sign_in.oidc;
  const back = encodeURIComponent(location.pathname + location.search);
  return (
    <section className="sign-in" data-testid="sign-in" aria-labelledby="sign-in-title">
      <h2 id="sign-in-title">Sign in</h2>
      <p>{reason}</p>
      {oidc && (
        <p>
          <a className="button primary" href={`${oidc.login}?next=${back}`} data-testid="oidc-login">
            Sign in with {new URL(oidc.issuer).host}
          </a>
        </p>
      )}
      <form className="login" data-testid="token-form" onSubmit={submit}>
        {/* password managers (and Chromium's form check) expect a user name beside a password */}
        <input type="text" name="username" autoComplete="username" value="signoff" readOnly hidden />
        <label htmlFor="sign-in-token">API token</label>
        <input
          id="sign-in-token"
          type="password"
          data-testid="token-input"
          value={token}
          onChange={(event) => setToken(event.target.value)}
          autoComplete="current-password"
          required
        />
        <button type="submit" className={oidc ? "" : "primary"} data-testid="token-submit" disabled={checking || !token}>
          Sign in with a token
        </button>
      </form>
      <p className="problem" role="alert" data-testid="sign-in-error">
        {error}
      </p>
      <p className="hint">
        <code>signoff principals add NAME --role ROLE</code> prints a personal token; <code>signoff demo</code>{" "}
        and <code>signoff serve</code> print the admin's when they make it.
      </p>
    </section>
  );
}
