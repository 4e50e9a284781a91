// The chat, over one of three transports, each a hook of its own: SSE with deferred approvals
// (useDeferredChat) or blocking ones (useBlockingChat), POST /api/chat; or the live socket (useLiveChat),
// WS /api/live, with `transport` "live". Whichever it is, the page shows the same Conversation.
import { useState } from "react";
import type { Principal, WaitMode } from "../shared/api";
import { Conversation } from "./Conversation";
import type { ChatSnapshot } from "./loadChat";
import { toolsByName, type Tools } from "./tools";
import { useBlockingChat } from "./useBlockingChat";
import type { ChatSession } from "./useChatSession";
import type { Decisions } from "./useDecisions";
import { useDeferredChat } from "./useDeferredChat";
import { useLiveChat } from "./useLiveChat";

export type TransportKind = "sse" | "live";

/** What a transport's hook gives the conversation: the chat, and how its cards are decided. */
export interface ChatMode {
  session: ChatSession;
  decisions: Decisions;
}

interface Props {
  snapshot: ChatSnapshot;
  /** Who this page is to the server (`GET /api/me`): whose decisions read "you". */
  me: Principal;
  /** The page's `?wait=` override; without it the server's default applies. SSE only. */
  waitOverride: WaitMode | undefined;
  transportKind: TransportKind;
}

/** The live socket's waits are always blocking. */
export const waitMode = (kind: TransportKind, override: WaitMode | undefined, fallback: WaitMode): WaitMode =>
  kind === "live" ? "blocking" : (override ?? fallback);

export function Chat({ snapshot, me, waitOverride, transportKind }: Props) {
  const [tools] = useState(() => toolsByName(snapshot.tools));
  const shown = { snapshot, waitOverride, me: me.id, tools };
  if (transportKind === "live") return <LiveChat {...shown} />;
  return waitMode(transportKind, waitOverride, snapshot.wait) === "blocking" ? (
    <BlockingChat {...shown} />
  ) : (
    <DeferredChat {...shown} />
  );
}

// A component per transport, so that each calls its own hook: the transport never changes while the page
// lives, and the hooks differ.
interface ModeProps {
  snapshot: ChatSnapshot;
  waitOverride: WaitMode | undefined;
  me: string;
  tools: Tools;
}

const DeferredChat = ({ snapshot, waitOverride, me, tools }: ModeProps) => (
  <Conversation chat={useDeferredChat(snapshot, waitOverride)} me={me} tools={tools} hint={snapshot.hint} />
);

const BlockingChat = ({ snapshot, waitOverride, me, tools }: ModeProps) => (
  <Conversation chat={useBlockingChat(snapshot, waitOverride)} me={me} tools={tools} hint={snapshot.hint} />
);

const LiveChat = ({ snapshot, me, tools }: ModeProps) => (
  <Conversation chat={useLiveChat(snapshot)} me={me} tools={tools} hint={snapshot.hint} />
);
