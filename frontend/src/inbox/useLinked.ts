// The approval a link names, `/approvals#<id>` (the MCP gateway's links for a client that can only open a URL):
// its row is marked as the current one and brought into view once it shows, and again whenever the hash changes.
import { useEffect, useRef, useState } from "react";

function named(): string {
  try {
    return decodeURIComponent(window.location.hash.slice(1));
  } catch {
    return ""; // a malformed escape names nothing
  }
}

/** The approval id the page's hash names ("" for none), following changes to it. */
export function useLinked(): string {
  const [linked, setLinked] = useState(named);
  useEffect(() => {
    const follow = () => setLinked(named());
    window.addEventListener("hashchange", follow);
    return () => window.removeEventListener("hashchange", follow);
  }, []);
  return linked;
}

/** A row's props when it may be the linked one: `aria-current` marks it, and it scrolls into view. */
export function useLinkedRow(linked: boolean) {
  const ref = useRef<HTMLLIElement>(null);
  useEffect(() => {
    if (linked) ref.current?.scrollIntoView({ block: "center" });
  }, [linked]);
  return { ref, "aria-current": linked ? ("true" as const) : undefined };
}
