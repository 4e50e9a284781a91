// When the chat sends the next request by itself (useChat's `sendAutomaticallyWhen`).
//
// The AI SDK's two predicates don't fit this server, alone or combined (read in ai 6.0.326's dist/index.mjs):
// - lastAssistantMessageIsCompleteWithApprovalResponses needs an answered approval in the step, so a step
//   whose only news is a browser tool's output is never sent.
// - lastAssistantMessageIsCompleteWithToolCalls only counts `output-available` / `output-error` as done, so a
//   step with a refused payment (`output-denied`) next to a browser tool's output would never be sent.
// So: send when every tool part of the last step is settled on the browser's side and at least one of them
// changed since the server last saw it. What the server saw is a set of `toolCallId:state` keys, filled from
// the loaded conversation and from every request sent (see useSseChat.ts).
// A call that started a task (seed 004) is left out: its output is the server's own news, the task goes on
// in the background, and the chat moves on when the user next speaks.
import type { UIMessage } from "ai";
import { lastStepTools, partKey } from "./parts";
import { taskOutput } from "./tasks";

const SETTLED = new Set(["approval-responded", "output-available", "output-error", "output-denied"]);

export function readyToSend(messages: UIMessage[], seen: ReadonlySet<string>): boolean {
  const tools = lastStepTools(messages).filter((part) => !part.providerExecuted && !taskOutput(part));
  return (
    tools.length > 0 &&
    tools.every((part) => SETTLED.has(part.state) && !(part.state === "output-available" && part.preliminary)) &&
    tools.some((part) => !seen.has(partKey(part)))
  );
}
