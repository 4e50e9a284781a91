// The message box and Send. `onSend` runs inside the submit event, a user gesture (see unlockAudio).
import { useState, type FormEvent } from "react";

export function Composer({ busy, onSend }: { busy: boolean; onSend: (text: string) => void }) {
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
        placeholder="pay 50 USD to Hanako · weather in Tokyo · where am I · play lofi beats"
        autoComplete="off"
        autoFocus
      />
      <button type="submit" className="primary" data-testid="send" disabled={busy || !text.trim()}>
        Send
      </button>
    </form>
  );
}
