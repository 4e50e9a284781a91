// The chat over one WebSocket, WS /api/live (its protocol is the docstring of src/signoff/server/live.py), as a
// plain AI SDK ChatTransport: useChat answers with its own addToolApprovalResponse / addToolOutput, and
// `sendAutomaticallyWhen` sends the answer like any request, here a `message` frame on the same socket.
//
// A live turn is one reply with one `[DONE]`, however many questions it asks. Where it waits on the client, the
// server pauses it with a `finish-step`, and the rule that follows lets useChat answer with an ordinary request:
// - the turn's open calls are a set: a toolCallId joins it on `tool-input-available` and leaves it on
//   `tool-output-available`, `tool-output-error` or `tool-output-denied`;
// - a `finish-step` while that set holds a call the page has not answered is the pause: the current stream
//   closes there, so the chat's status goes to "ready" and useChat may send the answer (a pause the server
//   sent before the page's answer reached it, the page's answer ends: a call the page answered counts again
//   once the server hands it to the browser, or refuses an answer);
// - chunks that come while no stream is open (a decision made elsewhere, a deadline, a timeout moved the turn
//   on) are queued, and `onQueued` tells the page, which follows the turn with the chat's `resumeStream()`;
// - the next stream takes the queue: the one an answer's `sendMessages` opens, or the one `reconnectToStream`
//   hands back mid-turn on the same socket, which sends no frame;
// - `[DONE]` ends the turn: the open stream closes, and the open calls and the queue are cleared (a turn that
//   ended while no stream was open keeps its queue until the page's resume shows it, to the end).
// A socket with no turn follows one with `{type: "resume"}`: the server replays the running reply from its
// start (`resumeStreamIsReplay`). useChat (ai 6.0.x) resumes a stream into a fresh message, so a mid-turn
// resume on the same socket replays too: the turn's chunks so far, from its `start` (which names the message),
// then the queue. A turn that streams into an earlier message (its reply opens with results of that message's
// calls) can't be replayed so, as useChatSession says of its catch-up.
// A socket that closes under a running turn stops nothing in the server: the reply goes on there, on any worker.
// The turn's open stream ends in an error, and the transport opens a new socket by itself (at once after a
// server's 1012, "restarting"; else after a backoff, a few tries in all) and follows the turn with `resume`,
// skipping the replayed chunks the page already has (see `Turn.replayed`): what follows them, the decision made
// meanwhile and the call's result, streams into the page like any news of the turn. A server that stops ends
// its turns itself (an `error` chunk, `[DONE]`) before its 1012, so a turn cut so is followed again too.
// Should no socket open, the page is told to reload; an answer then tries once more (the answer, then `resume`).
import type { ChatTransport, UIMessage, UIMessageChunk } from "ai";

type Send = Parameters<ChatTransport<UIMessage>["sendMessages"]>[0];
type Reconnect = Parameters<ChatTransport<UIMessage>["reconnectToStream"]>[0];
type Frame =
  | { type: "message"; id: string; messages: UIMessage[]; trigger: Send["trigger"]; messageId?: string }
  | { type: "resume"; id: string }
  | { type: "interrupt" }
  | { type: "ping" };

const DONE = "[DONE]";
const PING_MS = 20_000; // well inside the idle timeouts of proxies, while a turn waits for a person
const CLOSED = "the live connection closed";
const RELOAD = `${CLOSED} and could not be opened again; reload the page to follow the reply`;
/** Close code of a server that stops (RFC 6455's "service restart"): the reply goes on elsewhere at once. */
const RESTARTING = 1012;
/** Sockets the transport tries to open after one closed under a turn, each after twice the last wait. */
const REOPEN_TRIES = 6;
const REOPEN_FIRST_MS = 500;
const REOPEN_MAX_MS = 8_000;

/** /api/live on the page's own host, over wss: when the page came over https:. */
export const liveUrl = (): string => `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/api/live`;

export interface LiveOptions {
  url?: string;
  /** Chunks of the turn came while no stream was open: the page follows the turn with `resumeStream()`. */
  onQueued?: () => void;
  /** A turn lost with its socket is followed again on a new one: the closed socket's error is over. */
  onReopened?: () => void;
  /** A turn followed again brought nothing new (no reply runs now): the page takes the chat from the server. */
  onStale?: () => void;
}

export class LiveChatTransport implements ChatTransport<UIMessage> {
  /** The server replays a resumed reply from its start; so does a mid-turn `reconnectToStream` (see there). */
  readonly resumeStreamIsReplay = true;
  private readonly url: string;
  private readonly onQueued: (() => void) | undefined;
  private readonly onReopened: (() => void) | undefined;
  private readonly onStale: (() => void) | undefined;
  private socket: WebSocket | undefined;
  private opening: Promise<WebSocket> | undefined;
  /** The turn the socket follows; once ended, until a stream took the chunks it queued. */
  private turn: Turn | undefined;
  /** A turn whose socket closed before its `[DONE]`: the reply goes on in the server. */
  private lost: Turn | undefined;
  /** The last turn, while it ended cut by its server's `error` (see `closed`). */
  private cut: Turn | undefined;
  /** Settles once the transport stopped trying to open a socket for the lost turn (see `reopen`). */
  private reopening: Promise<void> | undefined;
  /** What the page should say while a lost turn has no socket: reconnecting, or reload. */
  trouble: string | undefined;
  private readonly listeners = new Set<() => void>();
  private waking = false;

  constructor({ url = liveUrl(), onQueued, onReopened, onStale }: LiveOptions = {}) {
    this.url = url;
    this.onQueued = onQueued;
    this.onReopened = onReopened;
    this.onStale = onStale;
  }

  /** A turn runs: from the frame that started or followed it to its `[DONE]`, paused or not (the server
   * refuses a new user message meanwhile), and while a turn's socket closed under it. */
  get turnOpen(): boolean {
    return (this.turn !== undefined && !this.turn.ended) || this.lost !== undefined;
  }

  /** Something waits for the page to follow the turn (see `onQueued`). */
  get queued(): boolean {
    const turn = this.turn;
    return turn !== undefined && turn.feed === undefined && turn.queue.length > 0;
  }

  /** Whether the running turn announced the call and sent no result for it yet. */
  awaits(toolCallId: string): boolean {
    return (this.turn ?? this.lost)?.open.has(toolCallId) ?? false;
  }

  /** For useSyncExternalStore: called whenever `turnOpen` or `trouble` may have changed. */
  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  };

  async sendMessages({ chatId, messages, trigger, messageId, abortSignal }: Send) {
    const frame: Frame = { type: "message", id: chatId, messages, trigger, messageId };
    for (;;) {
      if (this.reopening) await this.reopening; // the lost turn is followed again first, if it can be
      const socket = await this.connect();
      let turn = this.turn;
      // An interrupted turn's last frames are still coming and must not land in the next stream.
      if (turn?.interrupted && !turn.ended) {
        await turn.over;
        continue;
      }
      let feed: Feed;
      if (turn !== undefined && !turn.ended) {
        // An answer to the running turn: what the turn queued came before it, so its pauses are over.
        turn.answer(messages);
        feed = this.attach(turn, { fresh: true });
        socket.send(JSON.stringify(frame));
      } else if (this.lost !== undefined) {
        // An answer after no socket opened for the lost turn: this one follows the turn again, from the
        // chunks the page has not seen yet (the server replays the reply from its start).
        turn = this.turn = this.lost.again();
        this.lost = this.trouble = undefined;
        turn.answer(messages);
        feed = this.attach(turn, { fresh: true });
        socket.send(JSON.stringify(frame));
        socket.send(JSON.stringify({ type: "resume", id: chatId } satisfies Frame));
      } else {
        turn = this.turn = new Turn(chatId);
        this.cut = undefined;
        feed = this.attach(turn, { fresh: true });
        socket.send(JSON.stringify(frame));
      }
      this.changed();
      const started = turn;
      abortSignal?.addEventListener("abort", () => {
        if (this.turn !== started || started.ended || started.interrupted || started.feed !== feed) return;
        started.interrupted = true; // the server ends the turn with `abort`, then `[DONE]`
        this.socket?.send(JSON.stringify({ type: "interrupt" } satisfies Frame));
      });
      return feed.stream;
    }
  }

  // An abort here never interrupts: useChat also aborts a resume that another resume replaces.
  async reconnectToStream({ chatId }: Reconnect): Promise<ReadableStream<UIMessageChunk> | null> {
    for (;;) {
      if (this.reopening) {
        await this.reopening;
        continue;
      }
      if (this.lost !== undefined) throw new Error(RELOAD);
      const turn = this.turn;
      if (turn?.interrupted) {
        await turn.over; // its last frames must not land in this stream
        continue;
      }
      // Mid-turn on this socket: no frame. useChat (ai 6.0.x) resumes into a fresh message, so the stream is
      // the turn replayed from its `start` (which names the message), then the queue, then what follows.
      if (turn !== undefined) return this.attach(turn, { fresh: false }).stream;
      const socket = await this.connect();
      if (this.turn !== undefined) continue; // a turn began meanwhile
      const fresh = (this.turn = new Turn(chatId));
      this.cut = undefined;
      const feed = this.attach(fresh, { fresh: true });
      socket.send(JSON.stringify({ type: "resume", id: chatId } satisfies Frame));
      this.changed();
      return (await feed.started) ? feed.stream : null; // only `[DONE]`: no reply runs
    }
  }

  /** Opens the turn's stream, fed first by what the turn queued. `fresh`: a new request, whose answer the
   * server moves the turn on with, so queued pauses are over; else a mid-turn resume, which replays the turn
   * so far and stops at a queued pause like the stream it replaces would have. */
  private attach(turn: Turn, { fresh }: { fresh: boolean }): Feed {
    turn.feed?.close(); // a reader that still had one let go of it for the new one
    const feed = new Feed(() => {
      if (turn.feed === feed) turn.feed = undefined;
    });
    turn.feed = feed;
    if (!fresh) for (const chunk of turn.shown) feed.push(chunk);
    const queued = turn.queue.splice(0);
    for (const [index, { chunk, pause }] of queued.entries()) {
      this.deliver(turn, chunk, pause && !fresh && !turn.ended);
      if (turn.feed === undefined) {
        turn.queue.push(...queued.slice(index + 1));
        this.wake();
        break;
      }
    }
    // A replay of a turn paused with nothing queued stops where the turn waits, as its stream did.
    if (!fresh && turn.feed === feed && turn.paused && !turn.ended) {
      turn.feed = undefined;
      feed.close();
    }
    if (turn.ended && turn.queue.length === 0) this.finish(turn);
    return feed;
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
    socket.onclose = ({ code }) => {
      clearInterval(ping);
      if (this.socket === socket) this.closed(code);
    };
    this.socket = socket;
    this.opening = new Promise((resolve, reject) => {
      socket.onopen = () => resolve(socket);
      socket.onerror = () => reject(new Error(`could not open the live connection to ${this.url}`));
    });
    return this.opening;
  }

  private receive(text: string): void {
    const turn = this.turn;
    if (text === DONE) {
      if (turn === undefined || turn.ended) return;
      turn.end();
      if (turn.cutShort) this.cut = turn;
      if (turn.stale()) this.onStale?.();
      if (turn.feed !== undefined || turn.queue.length === 0 || turn.interrupted) this.finish(turn);
      else this.wake(); // the turn ended while paused: a stream still has to show its last chunks
      this.changed();
      return;
    }
    const chunk = JSON.parse(text) as UIMessageChunk | { type: "pong" };
    if (chunk.type === "pong" || turn === undefined || turn.ended) return;
    if (turn.interrupted) return; // nobody reads the rest of a turn the page stopped
    if (!turn.replayed(chunk)) return;
    turn.cutShort = chunk.type === "error";
    const pause = turn.track(chunk);
    if (!transient(chunk) && chunk.type !== "error") turn.paused = pause;
    if (chunk.type === "error") {
      // a refused frame: the open stream ends in this error (useChat's status "error"); the turn goes on
      turn.feed?.push(chunk);
      return;
    }
    if (turn.feed !== undefined) this.deliver(turn, chunk, pause);
    else {
      turn.queue.push({ chunk, pause });
      this.wake();
    }
  }

  /** Gives a chunk to the open stream, which closes at a pause. */
  private deliver(turn: Turn, chunk: UIMessageChunk, pause: boolean): void {
    const feed = turn.feed as Feed;
    feed.push(chunk);
    turn.show(chunk);
    if (pause) {
      turn.feed = undefined;
      feed.close();
    }
  }

  /** The turn is over and a stream has shown all of it. */
  private finish(turn: Turn): void {
    turn.feed?.close();
    turn.feed = undefined;
    if (this.turn === turn) this.turn = undefined;
    this.changed();
  }

  private closed(code: number): void {
    this.socket = this.opening = undefined;
    const turn = this.turn;
    if (turn === undefined || turn.ended) {
      // A server that stops ends its turns (an `error`, `[DONE]`) before it closes with 1012: the turn it cut
      // goes on in the server, and is followed again like a lost one.
      const cut = this.cut;
      this.cut = undefined;
      if (code === RESTARTING && cut !== undefined && (turn === undefined || turn === cut)) {
        this.lost = cut;
        this.reopen({ atOnce: true });
        this.changed();
      }
      return; // an ended turn's queue stays for a stream to take
    }
    this.turn = undefined;
    if (!turn.interrupted) {
      // The reply goes on in the server and its approval stays pending: a new socket follows it.
      this.lost = turn;
      turn.feed?.fail(new Error(`${CLOSED}; connecting again`));
      turn.feed = undefined;
      this.reopen({ atOnce: code === RESTARTING });
    }
    turn.end();
    this.changed();
  }

  /** Opens a socket again for the lost turn and follows it there with `resume`: a few tries, each after twice
   * the last wait (the first at once after a 1012), until one opens; else the page is told to reload. */
  private reopen({ atOnce }: { atOnce: boolean }): void {
    if (this.reopening) return;
    const attempt = async () => {
      for (let tried = 0; tried < REOPEN_TRIES; tried += 1) {
        this.trouble = `${CLOSED}; connecting again (try ${tried + 1} of ${REOPEN_TRIES})…`;
        this.changed();
        const wait = tried === 0 && atOnce ? 0 : Math.min(REOPEN_FIRST_MS * 2 ** tried, REOPEN_MAX_MS);
        await new Promise((wake) => setTimeout(wake, wait));
        const lost = this.lost;
        if (lost === undefined) return;
        const socket = await this.connect().catch(() => undefined);
        if (socket === undefined) continue;
        this.lost = this.trouble = undefined;
        this.turn = lost.again();
        socket.send(JSON.stringify({ type: "resume", id: lost.chatId } satisfies Frame));
        this.changed();
        this.onReopened?.();
        return;
      }
      this.trouble = RELOAD;
      this.changed();
    };
    this.reopening = attempt().finally(() => (this.reopening = undefined));
  }

  /** Tells the page, once the chunks that came with it were handled, that it should follow the turn. */
  private wake(): void {
    if (this.waking) return;
    this.waking = true;
    queueMicrotask(() => {
      this.waking = false;
      if (this.queued) this.onQueued?.();
    });
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}

interface Queued {
  chunk: UIMessageChunk;
  /** It is a pause (see the rule at the top). */
  pause: boolean;
}

/** What the page knows of one turn. */
class Turn {
  /** The calls announced in the turn with no result yet. */
  readonly open = new Set<string>();
  /** Those of them the page answered (a result, or a person's decision). */
  readonly answered = new Set<string>();
  /** The chunks the page's streams were given, for a mid-turn replay: all but transient ones. */
  readonly shown: UIMessageChunk[] = [];
  /** Chunks that came while no stream was open. */
  queue: Queued[] = [];
  /** The stream open now, if any. */
  feed: Feed | undefined;
  interrupted = false;
  ended = false;
  /** The last chunk of the reply so far is a pause. */
  paused = false;
  /** The last chunk was an `error`: a turn that ends so was cut (its server stops, say), not finished. */
  cutShort = false;
  /** The replay's chunks to skip when this turn is followed again on a new socket: the ones already shown. */
  private skip: UIMessageChunk[] = [];
  /** Followed again on a new socket: whether anything came past the replay of what the page was shown. */
  private followedAgain = false;
  private news = false;
  readonly over: Promise<void>;
  private resolveOver!: () => void;

  constructor(readonly chatId: string) {
    this.over = new Promise((resolve) => (this.resolveOver = resolve));
  }

  end(): void {
    this.ended = true;
    this.resolveOver();
  }

  /** The same turn, followed again on a new socket from the server's replay. */
  again(): Turn {
    const turn = new Turn(this.chatId);
    for (const call of this.open) turn.open.add(call);
    turn.shown.push(...this.shown);
    turn.skip = [...this.shown];
    turn.paused = this.paused;
    turn.followedAgain = true;
    return turn;
  }

  /** Whether a chunk is news: false while a replay repeats what the page was shown before its socket closed.
   * Where the replay differs from it, the rest is news: the server continues the cut reply in a new one on
   * another worker, which opens with the same message's `start` and goes on with the results of its calls. */
  replayed(chunk: UIMessageChunk): boolean {
    if (chunk.type === "error") return true; // not the reply's own: a refused frame, or its server stopping
    if (this.skip.length > 0) {
      if (transient(chunk)) return false; // long over
      if (same(this.skip[0] as UIMessageChunk, chunk)) {
        this.skip.shift();
        return false;
      }
      this.skip = [];
    }
    this.news = true;
    return true;
  }

  /** Followed again, the turn ended with nothing new: the reply the page was shown no longer runs anywhere,
   * and the chat as the server holds it may have gone on (a decision, another page). */
  stale(): boolean {
    return this.followedAgain && !this.news;
  }

  /** The calls an answer the page sends answers: the tool parts of its last message that carry a result or
   * a decision. A pause of the server that crosses the answer on the socket is no pause for them. */
  answer(messages: UIMessage[]): void {
    const last = messages.at(-1);
    if (last?.role !== "assistant") return;
    for (const part of last.parts) {
      if ("toolCallId" in part && ANSWERED.has(part.state)) this.answered.add(part.toolCallId);
    }
  }

  /** Keeps the open calls, and says whether the chunk is a pause. */
  track(chunk: UIMessageChunk): boolean {
    switch (chunk.type) {
      case "tool-input-available":
        this.open.add(chunk.toolCallId);
        return false;
      case "tool-output-available":
      case "tool-output-error":
      case "tool-output-denied":
        this.open.delete(chunk.toolCallId);
        this.answered.delete(chunk.toolCallId);
        return false;
      case "data-browser-call":
        // handed to the browser after the page's answer (an approval alone): its result is the page's to give
        this.answered.delete((chunk.data as { toolCallId: string }).toolCallId);
        return false;
      case "error":
        this.answered.clear(); // an answer refused: the calls it answered wait on the page again
        return false;
      case "finish-step":
        return [...this.open].some((call) => !this.answered.has(call));
      default:
        return false;
    }
  }

  show(chunk: UIMessageChunk): void {
    if (!transient(chunk)) this.shown.push(chunk);
  }
}

/** The states of a tool part that answer its call. */
const ANSWERED = new Set(["approval-responded", "output-available", "output-error"]);

const transient = (chunk: UIMessageChunk): boolean => "transient" in chunk && chunk.transient === true;

/** The same chunk of the reply, as far as the page can tell. */
function same(a: UIMessageChunk, b: UIMessageChunk): boolean {
  const key = (chunk: UIMessageChunk) => {
    const { type } = chunk;
    const named = chunk as { toolCallId?: string; id?: string; messageId?: string };
    return `${type}:${named.toolCallId ?? named.id ?? named.messageId ?? ""}`;
  };
  return key(a) === key(b);
}

/** One stream handed to useChat. */
class Feed {
  readonly stream: ReadableStream<UIMessageChunk>;
  /** Settles with the first frame: whether a chunk came before `[DONE]`. */
  readonly started: Promise<boolean>;
  private controller!: ReadableStreamDefaultController<UIMessageChunk>;
  private live = true; // false once closed, failed, or let go by its reader
  private settle!: { resolve: (started: boolean) => void; reject: (error: Error) => void };

  constructor(letGo: () => void) {
    this.stream = new ReadableStream({
      start: (controller) => void (this.controller = controller),
      cancel: () => {
        this.live = false;
        letGo();
      },
    });
    this.started = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    this.started.catch(() => undefined); // a stream nobody waits on may fail too
  }

  push(chunk: UIMessageChunk): void {
    this.settle.resolve(true);
    if (this.live) this.controller.enqueue(chunk);
  }

  close(): void {
    this.settle.resolve(false);
    if (this.live) this.controller.close();
    this.live = false;
  }

  fail(error: Error): void {
    this.settle.reject(error);
    if (this.live) this.controller.error(error);
    this.live = false;
  }
}
