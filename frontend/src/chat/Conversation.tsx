// What the chat shows, whatever its transport: the messages with a card for each tool call, the status line
// and the composer.
import { getToolName } from "ai";
import { decider } from "../shared/api";
import { reveal } from "../shared/visible";
import { unlockBrowserTools } from "./browser/registry";
import type { ChatMode } from "./Chat";
import { Composer } from "./Composer";
import { Message } from "./Message";
import { lastStepTools, type ToolPart } from "./parts";
import { StatusLine } from "./StatusLine";
import { taskOutput, taskView } from "./tasks";
import { ToolCard } from "./ToolCard";
import type { Tools } from "./tools";
import { useStickToBottom } from "./useStickToBottom";

interface Props {
  chat: ChatMode;
  /** The page's principal id (`browser:<id>`): its decisions read "you". */
  me: string;
  tools: Tools;
  /** What the message box suggests: the served agent's own examples, when it has any. */
  hint: string | undefined;
}

export function Conversation({ chat: { session, decisions }, me, tools, hint }: Props) {
  const { messages, status, error, clearError, sendMessage, approvals, tasks, streaming, catchingUp } = session;
  useStickToBottom();

  function send(text: string) {
    unlockBrowserTools();
    void sendMessage({ text });
  }

  const renderTool = (part: ToolPart) => {
    const approval = "approval" in part && part.approval ? approvals.get(part.approval.id) : undefined;
    const lost =
      approval && decisions.answered.has(approval.id) && approval.state !== "pending" && decider(approval).id !== me;
    const output = taskOutput(part);
    return (
      <ToolCard
        part={part}
        info={tools.get(getToolName(part))}
        approval={approval}
        me={me}
        conflict={lost ? `your answer came too late: already decided by ${reveal(decider(approval).name)}` : undefined}
        onDecide={(approved, reason, remember) => decisions.decide(part, approved, reason, remember)}
        task={output && taskView(output, tasks.tasks.get(output.task_id))}
        onCancelTask={tasks.cancel}
      />
    );
  };

  return (
    <>
      <ol className="messages" aria-label="Conversation">
        {messages.map((message) => (
          <Message key={message.id} message={message} renderTool={renderTool} />
        ))}
      </ol>
      <StatusLine
        status={catchingUp ? "streaming" : status}
        error={error}
        tools={lastStepTools(messages)}
        approvals={approvals}
        onDismiss={clearError}
      />
      <Composer busy={streaming || catchingUp} onSend={send} hint={hint} />
    </>
  );
}
