// One chat message: its text, and a card for each tool call.
import { isToolUIPart, type UIMessage } from "ai";
import { Fragment, type ReactNode } from "react";
import type { ToolPart } from "./parts";

interface Props {
  message: UIMessage;
  renderTool: (part: ToolPart) => ReactNode;
}

export function Message({ message, renderTool }: Props) {
  return (
    <li className={`message message-${message.role}`} data-testid="message" data-role={message.role}>
      <span className="visually-hidden">{message.role === "user" ? "You:" : "Assistant:"}</span>
      {message.parts.map((part, index) => {
        if (part.type === "text") {
          return (
            <p key={index} className="text" data-testid="text">
              {part.text}
            </p>
          );
        }
        // A card appears once its arguments are complete, so it shows at its final size from the start.
        return isToolUIPart(part) && part.state !== "input-streaming" ? (
          <Fragment key={part.toolCallId}>{renderTool(part)}</Fragment>
        ) : null;
      })}
    </li>
  );
}
