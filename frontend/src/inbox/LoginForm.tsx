// Sign in with the approvals API token (`signoff demo` prints it). The token is checked before it is kept.
import { useState, type FormEvent } from "react";
import { ApiError, requestJson } from "../shared/api";

export function LoginForm({ problem, onToken }: { problem: string; onToken: (token: string) => void }) {
  const [token, setToken] = useState("");
  const [checking, setChecking] = useState(false);
  const [error, setError] = useState(problem);

  async function submit(event: FormEvent) {
    event.preventDefault();
    setChecking(true);
    setError("");
    try {
      await requestJson("/api/approvals?state=pending&limit=1", { headers: { authorization: `Bearer ${token}` } });
      onToken(token);
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
      <label htmlFor="token">Approvals API token</label>
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
        <code>signoff demo</code> prints the token when it starts; <code>SIGNOFF_API_TOKEN</code> chooses it.
      </p>
    </form>
  );
}
