// The message box and Send. `onSend` runs inside the submit event, a user gesture (see unlockAudio).
import { useState, type FormEvent } from "react";

interface Props {
  busy: boolean;
  onSend: (text: string) => void;
  /** The served agent's examples (the demo's grammar); a neutral line for any other agent. */
  hint: string | undefined;
}

export function Composer({ busy, onSend, hint }: Props) {
  const [text, setText] = useState("");

  function submit(event: FormEvent) {
    event.preventDefault();
    const message = text.trim();
    if (!message || busy) return;
    onSend(message);
    setText("");
  }

  return (
    <form className="composer" onSubmit={submit}>
      <label htmlFor="chat-input" className="visually-hidden">
        Message
      </label>
      <input
        id="chat-input"
        data-testid="chat-input"
        value={text}
        onChange={(event) => setText(event.target.value)}
        placeholder={hint ?? "Write a message"}
        autoComplete="off"
        autoFocus
      />
      <button type="submit" className="primary" data-testid="send" disabled={busy || !text.trim()}>
        Send
      </button>
    </form>
  );
}
