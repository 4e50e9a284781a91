// A minimal AI SDK ChatTransport over signoff's live socket (WS /api/live), written the standard way: the one a
// seed-000 client would write, with no callback of its own. useChat (or AbstractChat) does everything else:
// answers go through addToolApprovalResponse / addToolOutput, and sendAutomaticallyWhen sends them.
//
// The rules it follows are the live socket's (README, "The live socket"):
// - A turn is one reply on the socket, ended by `[DONE]`.
// - The turn PAUSES with a `finish-step` when it waits on the client: a call it was shown (tool-input-available)
//   has no result yet. The transport then ends the stream it gave the chat, so the chat is ready and can answer.
// - An answer is an ordinary `message` frame carrying what sendMessages gets; the rest of the turn streams into
//   the stream that answer opened.
// - Chunks that come while no stream is open (a deadline passed, someone decided elsewhere) are queued: they
//   open the next stream, the one the next answer or `chat.resumeStream()` asks for. (ai 7.x resumes into a
//   new message unless an answer is pending, so there the next answer is the way to follow.)
//
// Options: `framing: "sse"` asks for the `sse` subprotocol (frames are `data: <json>\n\n`, as seed 000 reads
// them); `onFrame(direction, frame)` sees every frame in and out, for a test's transcript.

const DONE = '[DONE]';
const RESULTS = new Set(['tool-output-available', 'tool-output-error', 'tool-output-denied']);

export class LiveChatTransport {
  #url;
  #framing;
  #onFrame;
  #socket;
  #opening;
  #controller; // the open stream's, or undefined
  #queue = []; // chunks (and `[DONE]`) that came while no stream was open
  #open = new Set(); // the turn's calls with no result yet
  #inTurn = false;

  constructor({ url, framing = 'json', onFrame = () => {} }) {
    this.#url = url;
    this.#framing = framing;
    this.#onFrame = onFrame;
  }

  // A turn that ended while the chat's stream was paused (a deadline passed, someone decided elsewhere) is
  // over: its rest is the answer to whatever the chat sends next, and the message, which answers that turn,
  // is not sent.
  async sendMessages({ chatId, messages, trigger, messageId, abortSignal }) {
    const socket = await this.#connect();
    const over = this.#queue.includes(DONE);
    const stream = this.#stream({ answering: !over });
    if (over) return stream;
    abortSignal?.addEventListener('abort', () => this.#send(socket, { type: 'interrupt' }));
    this.#send(socket, { type: 'message', id: chatId, messages, trigger, messageId });
    return stream;
  }

  // Mid-turn, following the turn needs no frame: the socket still carries it.
  async reconnectToStream() {
    return this.#inTurn || this.#queue.length > 0 ? this.#stream({ answering: false }) : null;
  }

  close() {
    this.#socket?.close();
  }

  // A stream that carries an answer does not end at a pause queued before it: the answer moves the turn on.
  #stream({ answering }) {
    const stream = new ReadableStream({
      start: (controller) => {
        this.#controller = controller;
      },
      cancel: () => {
        this.#controller = undefined;
      },
    });
    for (const item of this.#queue.splice(0)) this.#deliver(item, { pauses: !answering });
    return stream;
  }

  #deliver(item, { pauses = true } = {}) {
    if (this.#controller === undefined) {
      this.#queue.push(item);
      return;
    }
    if (item === DONE) {
      this.#inTurn = false;
      this.#open.clear();
      this.#end();
      return;
    }
    this.#inTurn = true;
    this.#controller.enqueue(item);
    if (item.type === 'tool-input-available') this.#open.add(item.toolCallId);
    if (RESULTS.has(item.type)) this.#open.delete(item.toolCallId);
    if (pauses && item.type === 'finish-step' && this.#open.size > 0) this.#end(); // the pause: the chat may answer
  }

  #end() {
    const controller = this.#controller;
    this.#controller = undefined;
    controller?.close();
  }

  #receive(text) {
    const data = this.#framing === 'sse' ? text.replace(/^data: /, '').replace(/\n\n$/, '') : text;
    const item = data === DONE ? DONE : JSON.parse(data);
    this.#onFrame('in', item, text);
    if (item !== DONE && item.type === 'pong') return;
    this.#deliver(item);
  }

  #send(socket, frame) {
    this.#onFrame('out', frame);
    socket.send(JSON.stringify(frame));
  }

  #connect() {
    if (this.#opening) return this.#opening;
    const socket = new WebSocket(this.#url, this.#framing === 'sse' ? ['sse'] : []);
    this.#socket = socket;
    socket.onmessage = ({ data }) => this.#receive(data);
    socket.onclose = () => this.#controller?.error(new Error('the live connection closed'));
    this.#opening = new Promise((resolve, reject) => {
      socket.onopen = () => resolve(socket);
      socket.onerror = () => reject(new Error(`could not open ${this.#url}`));
    });
    return this.#opening;
  }
}
