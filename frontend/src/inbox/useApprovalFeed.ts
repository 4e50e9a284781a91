// The approvals feed (GET /api/approvals/feed), read with fetch because EventSource cannot send the token:
// first every pending approval, then each approval that changes. Reconnects with backoff when it drops.
import { createParser } from "eventsource-parser";
import { useCallback, useEffect, useRef, useState } from "react";
import type { Approval } from "../shared/api";
import { withApproval } from "../shared/approvalMap";

export type FeedState = "connecting" | "live" | "reconnecting";

const FIRST_RETRY_MS = 1000;
const LAST_RETRY_MS = 30_000;

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((wake) => {
    const timer = setTimeout(wake, ms);
    const stop = () => {
      clearTimeout(timer);
      wake();
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}

export function useApprovalFeed(token: string, onUnauthorized: () => void) {
  const [approvals, setApprovals] = useState<ReadonlyMap<string, Approval>>(new Map());
  const [state, setState] = useState<FeedState>("connecting");
  const upsert = useCallback((approval: Approval) => setApprovals((known) => withApproval(known, approval)), []);
  const unauthorized = useRef(onUnauthorized);
  useEffect(() => {
    unauthorized.current = onUnauthorized;
  });

  useEffect(() => {
    const stop = new AbortController();
    const parser = createParser({
      onEvent: (event) => event.event === "approval" && upsert(JSON.parse(event.data) as Approval),
    });

    /** One connection, read to its end. */
    async function follow(): Promise<"ended" | "unauthorized"> {
      const response = await fetch("/api/approvals/feed", {
        headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
        signal: stop.signal,
      });
      if (response.status === 401) return "unauthorized";
      if (!response.ok || !response.body) throw new Error(`the feed answered ${response.status}`);
      // The feed starts with every pending approval again: forget the pending ones we knew, they may be gone.
      setApprovals((known) => new Map([...known].filter(([, approval]) => approval.state !== "pending")));
      setState("live");
      retry = FIRST_RETRY_MS;
      parser.reset();
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      for (let read = await reader.read(); !read.done; read = await reader.read()) parser.feed(read.value);
      return "ended";
    }

    let retry = FIRST_RETRY_MS;
    void (async () => {
      while (!stop.signal.aborted) {
        try {
          if ((await follow()) === "unauthorized") return unauthorized.current();
        } catch {
          // the connection failed or dropped: try again below
        }
        if (stop.signal.aborted) return;
        setState("reconnecting");
        await pause(retry, stop.signal);
        retry = Math.min(retry * 2, LAST_RETRY_MS);
      }
    })();
    return () => stop.abort();
  }, [token, upsert]);

  return { approvals, upsert, state };
}
