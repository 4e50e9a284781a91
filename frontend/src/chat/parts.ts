// Tool parts of AI SDK UI messages, as this page reads them.
import { isToolUIPart, type DynamicToolUIPart, type ToolUIPart, type UIMessage } from "ai";

export type ToolPart = ToolUIPart | DynamicToolUIPart;

/** The tool parts after the last `step-start` of the last message, if it is the assistant's. */
export function lastStepTools(messages: UIMessage[]): ToolPart[] {
  const last = messages.at(-1);
  if (last?.role !== "assistant") return [];
  const start = last.parts.findLastIndex((part) => part.type === "step-start");
  return last.parts.slice(start + 1).filter(isToolUIPart);
}

/** Every tool part of the conversation, in order. */
export function allTools(messages: UIMessage[]): ToolPart[] {
  return messages.flatMap((message) => message.parts.filter(isToolUIPart));
}

/** What the server has seen of a part, as a set key: its call and state. */
export const partKey = (part: ToolPart): string => `${part.toolCallId}:${part.state}`;

/** The message that holds a call. */
export const messageOf = (messages: UIMessage[], toolCallId: string): UIMessage | undefined =>
  messages.find((message) => message.parts.some((part) => isToolUIPart(part) && part.toolCallId === toolCallId));
