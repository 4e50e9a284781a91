// The chat over one WebSocket, WS /api/live (its protocol is the docstring of src/signoff/server/live.py).
// Waits there are blocking: a turn stays open while a tool waits for a person or for this browser, so the
// answers must travel while the stream is open. useChat only sends once a stream has ended, hence `respond`.
import type { ChatTransport, UIMessage, UIMessageChunk } from "ai";
import type { ToolPart } from "./parts";

type Send = Parameters<ChatTransport<UIMessage>["sendMessages"]>[0];
type Reconnect = Parameters<ChatTransport<UIMessage>["reconnectToStream"]>[0];
/** How a running turn is answered: an approval response, or a browser tool's result. */
export type Answer =
  | { state: "approval-responded"; approval: { id: string; approved: boolean; reason?: string } }
  | { state: "output-available"; output: unknown }
  | { state: "output-error"; errorText: string };
type AnswerPart = Pick<ToolPart, "type" | "toolCallId" | "input"> & { toolName?: string } & Answer;
type Frame =
  | {
      type: "message";
      id: string;
      messages: UIMessage[] | [{ id: string; role: "assistant"; parts: [AnswerPart] }];
      trigger: Send["trigger"];
      messageId?: string;
    }
  | { type: "resume"; id: string }
  | { type: "interrupt" }
  | { type: "ping" };

const DONE = "[DONE]";
const PING_MS = 20_000; // well inside the idle timeouts of proxies, while a turn waits for a person

/** /api/live on the page's own host, over wss: when the page came over https:. */
export const liveUrl = (): string => `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/live`;

export class LiveChatTransport implements ChatTransport<UIMessage> {
  /** The server replays a resumed reply from its start. */
  readonly resumeStreamIsReplay = true;
  private socket: WebSocket | undefined;
  private opening: Promise<WebSocket> | undefined;
  /** The turn the socket follows: the server's chunks go to its stream until `[DONE]`. */
  private turn: Turn | undefined;

  constructor(private readonly url: string = liveUrl()) {}

  async sendMessages({ chatId, messages, trigger, messageId, abortSignal }: Send) {
    const turn = await this.begin({ type: "message", id: chatId, messages, trigger, messageId });
    abortSignal?.addEventListener("abort", () => {
      if (this.turn !== turn || turn.interrupted) return;
      turn.interrupted = true; // the server ends the turn with `abort`, then `[DONE]`
      this.socket?.send(JSON.stringify({ type: "interrupt" } satisfies Frame));
    });
    return turn.stream;
  }

  // An abort here never interrupts: useChat also aborts a resume that another resume replaces.
  async reconnectToStream({ chatId }: Reconnect) {
    const turn = await this.begin({ type: "resume", id: chatId });
    return (await turn.started) ? turn.stream : null; // only `[DONE]`: no reply runs
  }

  /** Answers a call of the running turn, in message `messageId`, without a stream of its own: the turn's
   * stream carries what follows. The server takes the one changed part, nothing else of the chat. */
  async respond(chatId: string, messageId: string, part: ToolPart, answer: Answer): Promise<void> {
    const { type, toolCallId, input } = part;
    const answered: AnswerPart = { type, toolCallId, input, ...answer };
    if (part.type === "dynamic-tool") answered.toolName = part.toolName;
    const messages: [{ id: string; role: "assistant"; parts: [AnswerPart] }] = [
      { id: messageId, role: "assistant", parts: [answered] },
    ];
    (await this.connect()).send(
      JSON.stringify({ type: "message", id: chatId, messages, trigger: "submit-message" } satisfies Frame),
    );
  }

  private async begin(frame: Frame): Promise<Turn> {
    for (;;) {
      const socket = await this.connect();
      if (this.turn === undefined) {
        const turn = (this.turn = new Turn());
        socket.send(JSON.stringify(frame));
        return turn;
      }
      // An interrupted turn's last frames are still coming and must not land in the new one. Any other
      // turn still followed was let go by its reader; a socket follows one turn, so start on a fresh one.
      if (this.turn.interrupted) await this.turn.ended;
      else this.drop(new Error("the live connection was replaced"));
    }
  }

  private connect(): Promise<WebSocket> {
    if (this.opening) return this.opening;
    const socket = new WebSocket(this.url);
    const ping = setInterval(() => {
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: "ping" } satisfies Frame));
    }, PING_MS);
    socket.onmessage = ({ data }: MessageEvent<string>) => {
      if (this.socket === socket) this.receive(data);
    };
    socket.onclose = () => {
      clearInterval(ping);
      // The reply goes on in the server and its approval stays pending: a reload follows it again.
      const error = new Error("the live connection closed; reload the page to follow the reply");
      if (this.socket === socket) this.drop(error);
    };
    this.socket = socket;
    this.opening = new Promise((resolve, reject) => {
      socket.onopen = () => resolve(socket);
      socket.onerror = () => reject(new Error(`could not open the live connection to ${this.url}`));
    });
    return this.opening;
  }

  private receive(text: string): void {
    if (text === DONE) {
      this.turn?.close();
      this.turn = undefined;
      return;
    }
    const chunk = JSON.parse(text) as UIMessageChunk | { type: "pong" };
    // Without a turn, only a refused answer can come (an `error`); the card that sent it stays as it was.
    if (chunk.type !== "pong") this.turn?.push(chunk);
  }

  private drop(error: Error): void {
    const socket = this.socket;
    this.socket = this.opening = undefined;
    this.turn?.fail(error);
    this.turn = undefined;
    socket?.close();
  }
}

/** One turn's stream, fed by the socket. */
class Turn {
  interrupted = false;
  readonly stream: ReadableStream<UIMessageChunk>;
  /** Settles with the first frame: whether a chunk came before `[DONE]`. */
  readonly started: Promise<boolean>;
  readonly ended: Promise<void>;
  private controller!: ReadableStreamDefaultController<UIMessageChunk>;
  private open = true; // false once ended, or once the reader let go
  private start!: { resolve: (started: boolean) => void; reject: (error: Error) => void };
  private end!: () => void;

  constructor() {
    this.stream = new ReadableStream({
      start: (controller) => void (this.controller = controller),
      cancel: () => void (this.open = false),
    });
    this.started = new Promise((resolve, reject) => (this.start = { resolve, reject }));
    this.started.catch(() => undefined); // a turn nobody waits on may fail too
    this.ended = new Promise((resolve) => (this.end = resolve));
  }

  push(chunk: UIMessageChunk): void {
    this.start.resolve(true);
    if (this.open) this.controller.enqueue(chunk);
  }

  close(): void {
    this.start.resolve(false);
    if (this.open) this.controller.close();
    this.open = false;
    this.end();
  }

  fail(error: Error): void {
    this.start.reject(error);
    if (this.open) this.controller.error(error);
    this.open = false;
    this.end();
  }
}
