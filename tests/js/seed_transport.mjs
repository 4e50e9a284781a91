// The seed's front end (hironow/adk-stream-protocol, `lib/bidi/` and `lib/sse/`, on ai 6.0.25), rewritten to
// behave as it does, so a test can point it at signoff and find out whether its page would work unchanged. Nothing
// here is signoff's idea of a good client; where the seed does something odd, this does it too.
//
// SeedChatTransport, the seed's WebSocket ChatTransport (its `WebSocketChatTransport`, `EventReceiver`,
// `EventSender`):
// - Opens `new WebSocket(url)` with no protocols, once, when the first message goes; a new one only after the
//   socket closed. The page appends `/live` to its one backend URL.
// - Every frame it sends is flat JSON with `type`, `version: "1.0"` and `timestamp`: a turn is the `message` event
//   (`id`, `messages`, `trigger`, `messageId`, as `sendMessages` gets them), and every `pingMs` (2 s in the seed) a
//   `ping` carrying `Date.now()`, which the pong is expected to echo.
// - A frame that does not start with `data: ` is not a stream chunk: it is parsed as JSON and looked at only if it
//   is a `pong` (the seed measures its latency); anything else is dropped. From a `data: ` frame it takes the rest,
//   trimmed: `[DONE]`, or a chunk (malformed JSON is skipped, `data-pcm` audio is played and not shown).
// - The stream it gives the chat ends at `[DONE]`, or at the first `finish-step` after a `tool-approval-request`
//   in that stream (the pause, so the chat is ready and can answer); at nothing else. A later `[DONE]` in the same
//   stream is a protocol violation and ignored. Chunks that come after the stream ended are dropped (the seed
//   enqueues into the closed stream, which throws, and logs it).
// - The next message opens a new stream only if the last one ended that way; otherwise the chunks keep going to
//   the old stream, and the new one never gets any. The socket closing ends the stream (normally, not as an
//   error). `reconnectToStream` is not supported (null). Cancelling the stream (the chat dropping it) closes the
//   socket.
//
// seedSseTransport: the seed's SSE mode, the AI SDK's DefaultChatTransport at `{base}/stream`, with its
// prepareSendMessagesRequest (which keeps the default body and only routes and adds headers).
//
// seedSendAutomaticallyWhen: the seed's `sendAutomaticallyWhenCore` (lib/core/send-automatically-when.ts), on the
// AI SDK's own part states. `everyApproval: true` is the seed as written: while any call of the last message still
// asks for approval it waits, so two questions of one step go in one message. `everyApproval: false` sends as soon
// as one approval is answered (one message per click), which is what the seed's client does against its own
// backend, whose live mode asks one question per step. In both, an approved browser tool (the seed's "frontend
// execute" tools) waits for its output, and the approval and the output go in one message (approve-and-run).

const DONE = '[DONE]';

// The seed's registry of tools the browser runs after approval (lib/tool-utils.ts).
export const SEED_FRONTEND_TOOLS = ['get_location', 'take_photo', 'get_camera'];

// The seed's tool card (components/tool-invocation.tsx) answers with these reasons.
export const SEED_APPROVED = 'User approved the tool execution.';
export const SEED_DENIED = 'User denied the tool execution.';

export class SeedChatTransport {
  #url;
  #timeoutMs;
  #pingMs;
  #onFrame;
  #ws = null;
  #controller = null; // the stream the receiver feeds
  #pinger = null;
  #lastPing = null;
  #receiver;

  // `onFrame(record)` sees every frame in and out: {out}, {in, raw, delivered}, {pong, raw, echoes}, {dropped: raw},
  // {closed: code}.
  constructor({ url, timeoutMs = 30_000, pingMs = 2_000, onFrame = () => {} }) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
    this.#pingMs = pingMs;
    this.#onFrame = onFrame;
    this.#receiver = new SeedReceiver({
      onFrame,
      onPong: (timestamp, raw) => this.#onFrame({ pong: timestamp, raw, echoes: timestamp === this.#lastPing }),
    });
  }

  async sendMessages({ chatId, messages, trigger, messageId }) {
    return new ReadableStream({
      start: async (controller) => {
        try {
          let active = controller;
          if (!this.#ws || this.#ws.readyState === WebSocket.CLOSED || this.#ws.readyState === WebSocket.CLOSING) {
            await this.#open(controller);
            this.#controller = controller;
            this.#receiver.reset();
          } else if (this.#receiver.done) {
            close(this.#controller);
            this.#controller = controller;
            this.#receiver.reset();
          } else {
            active = this.#controller ?? controller; // the seed keeps feeding the stream that has not ended
          }
          this.#route(active);
          const at = Date.now();
          this.#send({ type: 'message', version: '1.0', timestamp: at, id: chatId, messages, trigger, messageId });
        } catch (err) {
          controller.error(err);
        }
      },
      cancel: () => {
        this.#ws?.close();
        this.#ws = null;
      },
    });
  }

  async reconnectToStream() {
    return null;
  }

  close() {
    this.#stopPing();
    this.#ws?.close();
    this.#ws = null;
  }

  #open(controller) {
    const ws = new WebSocket(this.#url);
    this.#ws = ws;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        controller.error(new Error('WebSocket connection timeout'));
        ws.close();
      }, this.#timeoutMs);
      ws.onopen = () => {
        clearTimeout(timer);
        this.#startPing();
        resolve();
      };
      ws.onerror = () => {
        clearTimeout(timer);
        reject(new Error('WebSocket connection failed'));
      };
    });
  }

  #route(controller) {
    const ws = this.#ws;
    ws.onmessage = ({ data }) => this.#receiver.handle(data, controller);
    ws.onerror = () => {
      this.#stopPing();
      try {
        controller.error(new Error('WebSocket error'));
      } catch {}
    };
    ws.onclose = ({ code }) => {
      this.#stopPing();
      this.#onFrame({ closed: code });
      close(controller);
    };
  }

  #send(frame) {
    if (this.#ws?.readyState !== WebSocket.OPEN) return; // the seed warns and drops it
    this.#onFrame({ out: frame });
    this.#ws.send(JSON.stringify(frame));
  }

  #startPing() {
    this.#stopPing();
    this.#pinger = setInterval(() => {
      if (this.#ws?.readyState !== WebSocket.OPEN) return;
      this.#lastPing = Date.now();
      this.#send({ type: 'ping', version: '1.0', timestamp: this.#lastPing });
    }, this.#pingMs);
  }

  #stopPing() {
    clearInterval(this.#pinger);
    this.#pinger = null;
    this.#lastPing = null;
  }
}

class SeedReceiver {
  #done = false;
  #awaitingFinishStep = false; // a tool-approval-request came: the next finish-step ends the stream
  #onFrame;
  #onPong;

  constructor({ onFrame, onPong }) {
    this.#onFrame = onFrame;
    this.#onPong = onPong;
  }

  get done() {
    return this.#done;
  }

  reset() {
    this.#done = false;
    this.#awaitingFinishStep = false;
  }

  handle(text, controller) {
    if (!text.startsWith('data: ')) {
      let message;
      try {
        message = JSON.parse(text);
      } catch {}
      if (message?.type === 'pong' && message.timestamp) this.#onPong(message.timestamp, text);
      else this.#onFrame({ dropped: text });
      return;
    }
    const data = text.slice(6).trim();
    if (data === DONE) {
      const first = !this.#done;
      this.#onFrame({ in: DONE, raw: text, delivered: first });
      if (!first) return; // "Multiple [DONE] markers received. Ignoring subsequent [DONE]."
      this.#done = true;
      close(controller);
      return;
    }
    let chunk;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.#onFrame({ in: data, raw: text, delivered: false });
      return;
    }
    if (chunk?.type === 'data-pcm') {
      this.#onFrame({ in: chunk, raw: text, delivered: false });
      return;
    }
    const delivered = put(controller, chunk);
    this.#onFrame({ in: chunk, raw: text, delivered });
    if (chunk.type === 'tool-approval-request') {
      this.#awaitingFinishStep = true;
    } else if (chunk.type === 'finish-step' && this.#awaitingFinishStep) {
      close(controller);
      this.#done = true; // so the answer opens a new stream
      this.#awaitingFinishStep = false;
    }
  }
}

function put(controller, chunk) {
  try {
    controller.enqueue(chunk);
    return true;
  } catch {
    return false; // the stream already ended
  }
}

function close(controller) {
  try {
    controller?.close();
  } catch {}
}

export function seedSseTransport(ai, { base, fetch }) {
  const api = `${base}/stream`;
  return new ai.DefaultChatTransport({
    api,
    fetch,
    // The seed's own: drop `body` so the AI SDK builds the default one, route to the endpoint, keep the headers.
    prepareSendMessagesRequest: async ({ body: _body, ...rest }) => ({ ...rest, api, headers: { ...rest.headers } }),
  });
}

export function seedSendAutomaticallyWhen(ai, { everyApproval }) {
  const sent = new Set(); // "messageId:callIds" already sent, so the same answers never go twice
  const isTool = (part) => ai.isToolUIPart(part);
  const isText = (part) => part.type === 'text';
  return ({ messages }) => {
    const last = messages.at(-1);
    if (last?.role !== 'assistant') return false;
    const parts = last.parts ?? [];
    const responded = parts.filter((p) => isTool(p) && p.state === 'approval-responded');
    const asking = parts.some((p) => isTool(p) && p.state === 'approval-requested');

    // The backend already answered in words, and no approval is under way: nothing to send.
    if (responded.length === 0 && !asking && parts.some(isText)) {
      for (const key of [...sent]) if (key.startsWith(`${last.id}:`)) sent.delete(key);
      return false;
    }

    // A browser tool's output, added by addToolOutput.
    const outputs = parts.filter((p) => isTool(p) && p.state === 'output-available' && p.output !== undefined);
    if (outputs.length > 0) {
      if (parts.some(isText)) return false;
      if (responded.length === 0 && !asking) return true;
      const answered = new Set(responded.map((p) => p.toolCallId));
      if (outputs.some((p) => answered.has(p.toolCallId))) return true;
    }

    if (responded.length === 0) return false;
    // An approved browser tool waits for its output, so that both go in one message.
    for (const part of responded) {
      const browser = SEED_FRONTEND_TOOLS.includes(ai.getToolName(part));
      if (browser && part.approval?.approved === true && part.output === undefined) return false;
    }
    if (everyApproval && asking) return false;

    const key = `${last.id}:${responded.map((p) => p.toolCallId).sort().join(',')}`;
    if (outputs.length === 0 && sent.has(key)) return false;
    if (parts.some((p) => isTool(p) && (p.state === 'output-error' || p.error))) return false;
    sent.add(key);
    return true;
  };
}
