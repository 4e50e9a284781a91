// Remembered decisions (grants) that are active, with Revoke. `refresh` changes whenever one may have appeared.
import { useCallback, useEffect, useState } from "react";
import { requestJson, type Grant } from "../shared/api";
import { reveal } from "../shared/visible";

interface Props {
  token: string;
  refresh: number;
}

const SCOPE = { once: "once", session: "this chat", always: "every chat" };

export function GrantsList({ token, refresh }: Props) {
  const [grants, setGrants] = useState<Grant[]>();
  const [problem, setProblem] = useState("");
  const auth = `Bearer ${token}`;

  const load = useCallback(
    () =>
      requestJson<{ grants: Grant[] }>("/api/grants", { headers: { authorization: auth } }).then(
        (found) => (setGrants(found.grants), setProblem("")),
        (error: Error) => setProblem(error.message),
      ),
    [auth],
  );

  useEffect(() => {
    void load();
  }, [load, refresh]);

  async function revoke(grant: Grant) {
    try {
      await requestJson(`/api/grants/${encodeURIComponent(grant.id)}`, {
        method: "DELETE",
        headers: { authorization: auth },
      });
    } catch (error) {
      setProblem(error instanceof Error ? error.message : String(error));
    }
    await load();
  }

  return (
    <section aria-labelledby="grants-title">
      <h2 id="grants-title">Remembered decisions</h2>
      {problem && (
        <p className="problem" role="alert">
          {problem}
        </p>
      )}
      {grants?.length === 0 && <p className="empty">None: every asked call needs a person.</p>}
      <ul className="grants">
        {grants?.map((grant) => (
          <li key={grant.id} data-testid="grant-row" data-grant-id={grant.id} data-approval-id={grant.approval_id}>
            <span className="grant-what">
              <code>{grant.tool}</code> with {grant.any_args ? "any arguments" : "the same arguments"}, for{" "}
              {SCOPE[grant.scope]}
              {grant.chat_id && (
                <>
                  {" "}
                  <code>{reveal(grant.chat_id)}</code>
                </>
              )}{" "}
              · by {reveal(grant.created_by)}
            </span>
            <button type="button" data-testid="revoke" onClick={() => void revoke(grant)}>
              Revoke
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}
