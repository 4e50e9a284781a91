// Sign in with an API token: the one `signoff demo` prints (the admin), or a personal one from `signoff
// principals add`. The token is checked, by asking the server whom it names, before it is kept.
import { useState, type FormEvent } from "react";
import { ApiError, fetchMe, type Principal } from "../shared/api";

interface Props {
  problem: string;
  onSignIn: (token: string, me: Principal) => void;
}

export function LoginForm({ problem, onSignIn }: Props) {
  const [token, setToken] = useState("");
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState(problem);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setChecking(true);
    setError("");
    try {
      onSignIn(token, await fetchMe(`Bearer ${token}`));
    } catch (failure) {
      setError(failure instanceof ApiError && failure.status === 401 ? "wrong token" : String(failure));
      setChecking(false);
    }
  }

  return (
    <form className="login" data-testid="token-form" onSubmit={submit}>
      <h2>Sign in</h2>
      {/* password managers (and Chromium's form check) expect a user name beside a password */}
      <input type="text" name="username" autoComplete="username" value="signoff approvals" readOnly hidden />
      <label htmlFor="token">API token</label>
      <input
        id="token"
        type="password"
        data-testid="token-input"
        value={token}
        onChange={(event) => setToken(event.target.value)}
        autoComplete="current-password"
        required
        autoFocus
      />
      <button type="submit" className="primary" data-testid="token-submit" disabled={checking || !token}>
        Sign in
      </button>
      <p className="problem" role="alert" data-testid="token-error">
        {error}
      </p>
      <p className="hint">
        <code>signoff demo</code> prints the admin's token when it starts, unless <code>SIGNOFF_API_TOKEN</code>{" "}
        gave it; <code>signoff principals add NAME --role ROLE</code> prints a personal one.
      </p>
    </form>
  );
}
