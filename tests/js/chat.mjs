// Drives signoff's POST /api/chat with the REAL `ai` npm client, exactly as React's `useChat` does:
// AbstractChat + DefaultChatTransport + sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses.
//
// Usage: node tests/js/chat.mjs < scenario.json > transcript.json   (logs go to stderr)
// Exit 0 whenever the scenario ran, even if the server answered with errors (the transcript shows them).
// Exit 1 only for a harness problem: bad scenario, timeout, or a client that keeps re-POSTing (runaway loop);
// the partial transcript is then printed to stderr.
//
// Scenario (JSON object on stdin):
//   client      "ai-6.0.0" | "ai-6.0.25" | "ai-6" | "ai-7"     npm alias in tests/js/package.json (6.0.25 is the seed's)
//   api         "http://127.0.0.1:8123/api/chat"
//   base        "http://127.0.0.1:8123"          root for the approvals REST API (needed by `decide`)
//   token       bearer token for the approvals REST API
//   chatId      chat id (AbstractChat `id`, sent as body.id)
//   body        optional object merged into every chat request body (DefaultChatTransport `body`), e.g. {"wait":"blocking"}
//   headers     optional object of extra headers on every chat request (DefaultChatTransport `headers`)
//   timeoutMs   optional, default 20000: the most any one step may take
//   maxRequests optional, default 10: more chat requests than this is reported as a runaway re-POST loop
//   transport   optional, "sse" (default: DefaultChatTransport on `api`), "live" (the live socket at {base}/api/live
//               through tests/js/live_transport.mjs, a minimal standard ChatTransport, JSON frames) or "live-sse"
//               (the same, asking for the `sse` subprotocol: every frame `data: <json>\n\n`); or the seed's own front end
//               (tests/js/seed_transport.mjs): "seed-live" (its WebSocket transport at {base}/live) or "seed-sse" (its
//               DefaultChatTransport at {base}/stream)
//   answering   optional, how the chat decides to send an answer (sendAutomaticallyWhen):
//               "standard" (default): lastAssistantMessageIsCompleteWithApprovalResponses (and, with `browser`, see
//               there); "seed": the seed's own sendAutomaticallyWhen as it is written (it waits until every question of
//               the message is answered); "one-at-a-time": the seed's, sending as soon as one question is answered
//               (one message per click). With both seed modes an approved get_location waits for its output, and
//               both go in one message.
//   pingMs      optional, "seed-live" only: how often it pings (default 2000, the seed's)
//   reportStuck optional: a step the harness cannot finish (its timeout, an answer to a question that is not
//               there, a runaway) ends the scenario with exit 0 and the transcript's `stuck` saying why
//   browser     optional {"<tool>": {"output": <json>, "approval": bool}}: tools the client runs. Without approval,
//               onToolCall adds the output as soon as the input is available; with it, `respond` approving the
//               call adds the output right after the approval response (approve-and-run, one message). With
//               `browser` set, sendAutomaticallyWhen also sends once every call of the last step has its output,
//               and waits while an approved browser call has none. `"acknowledged": true` (the seed's change_bgm): the
//               browser acts on the call as it sees it (recorded in `acted`) and sends no result.
//   messages    optional initial chat.messages (a UIMessage array, e.g. an earlier transcript's `messages`): the
//               chat continues in a fresh client, as a reloaded page that restored its messages would
//   steps       list, run in order:
//     {"send": "pay 50 USD to Hanako"}
//         chat.sendMessage({text}); then wait until the chat is idle (status ready/error, no request in flight,
//         including the follow-ups that sendAutomaticallyWhen starts on its own).
//     {"send": "pay 50 USD to Hanako", "decide": [<decision>, ...]}
//         BLOCKING mode: start sendMessage and, WHILE it streams, decide the listed approvals through the REST API
//         (see `decide` below); then wait for the send to finish and the chat to be idle.
//     {"decide": [<decision>, ...]}
//         The same REST decisions with no chat activity alongside (e.g. deciding a deferred approval out of band).
//         <decision> = {"tool": "process_payment", "index": 0, "approved": true, "reason"?: "ok", "delayMs"?: 700}
//         Polls GET {base}/api/approvals?state=pending&chat={chatId} every 50 ms until the approval appears, waits
//         `delayMs` (default 0; e.g. so that a blocking stream sends keep-alive comments first), then
//         POST {base}/api/approvals/{id}/decision {"approved", "reason"?}. `index` counts that tool's approvals of
//         this chat in order of appearance (sorted by created_at, then id), remembered across polls, so deciding
//         one does not shift the index of the next. Listing the same (tool, index) twice decides it twice.
//     {"respond": [{"tool": "process_payment", "index": 0, "approved": true, "reason"?: "ok"}, ...]}
//         In-chat answer: in the last assistant message, the `index`-th part of that tool in state
//         `approval-requested`; chat.addToolApprovalResponse({id: part.approval.id, approved, reason}) for each, in
//         the listed order (indices refer to the parts as they were before this step). sendAutomaticallyWhen then
//         POSTs by itself; wait until idle. `"nth": n` instead of `index` names the n-th call of that tool in the
//         message, whatever the others' states (it must be asking), for answers given one step at a time.
//     {"sleep": ms}
//         Wait, with no chat activity (e.g. for a deadline to pass).
//     {"resume": true}
//         chat.resumeStream(); wait until idle.
//     {"post": {...raw body...}}
//         A raw fetch POST of that JSON to `api`, bypassing the chat object (recorded in `raw`).
//     {"replay": n}
//         Re-POST, raw, the exact body of the chat's n-th request (0-based) (recorded in `raw`).
//
// Transcript (JSON object on stdout):
//   version    resolved `ai` version of the client alias
//   client     the alias
//   messages   final chat.messages (plain JSON UIMessage array)
//   status     final chat.status
//   error      chat.error?.message (undefined -> key absent)
//   errors     every error passed to onError, in order (messages)
//   finishes   one entry per finished chat request: {finishReason?, isAbort, isDisconnect, isError}
//   requests   every chat request: <exchange> + {"body": <JSON sent>}
//   raw        every post/replay result: <exchange> + {"body": <JSON sent>}
//   decisions  every REST decision: {"tool", "index", "approval_id", "status", "body"}
//   frames     live transports only: every frame in order, {"in": <chunk or "[DONE]">, "raw": <text frame>} or
//              {"out": <frame sent>}; `requests` stays empty. "seed-live" adds to each `in` whether it reached the chat
//              (`delivered`: false when its stream had ended), and records {"pong": <timestamp>, "raw", "echoes": <it is
//              the last ping's>}, {"dropped": <a frame it ignored>}, {"closed": <code>}
//   acted      browser calls the page acted on without sending a result: {"tool", "toolCallId", "input"}
//   stuck      with `reportStuck`: why the scenario could not go on (absent when it did)
//   elapsedMs  wall time of the whole scenario
//   <exchange> = {"method", "url", "headers": {request headers}, "status", "responseHeaders": {content-type,
//                 cache-control, x-vercel-ai-ui-message-stream, x-accel-buffering (when present)},
//                 "chunks": [parsed `data:` JSON; a string if it was not JSON], "done": <count of [DONE]>,
//                 "doneLast": <last event was [DONE]>, "comments": <count of `:` comment lines, e.g. keep-alives>,
//                 "json"|"text": non-SSE response body, "fetchError": message if fetch itself failed,
//                 "streamError": message if reading the response body failed}
//
// Version notes (checked in each version's dist/index.d.ts and dist/index.js):
// - AbstractChat constructor, ChatState, sendMessage({text}), addToolApprovalResponse({id, approved, reason}),
//   DefaultChatTransport({api, fetch, body, headers}) and the request body {...body, id, messages, trigger,
//   messageId} are the same in all three. 6.x/7.x add an optional `options` to addToolApprovalResponse and 7.x an
//   optional ChatState.experimental_queuedMessages; neither is used here.
// - Only ai 6.0.0 adds a `user-agent: ai-sdk/6.0.0 runtime/node.js/...` header; later versions send no version.
// - On a non-2xx answer, 6.x throws Error(body text) and 7.x APICallError(body text): same `.message` either way.
// - The stream validation differs (that is the server's concern; see the transcript's `errors`): 6.0.0 rejects
//   unknown keys (strict objects), 6.0.326 and 7.x accept them; all reject unknown chunk types; 7.x adds
//   finishReason "interrupted" and chunk types such as reset-step, custom, tool-approval-response.
// - ai 7.x declares engines.node >=22 but everything used here runs on Node 20.

import { readFileSync } from 'node:fs';
import { LiveChatTransport } from './live_transport.mjs';
import { SeedChatTransport, seedSendAutomaticallyWhen, seedSseTransport } from './seed_transport.mjs';

const CLIENTS = ['ai-6.0.0', 'ai-6.0.25', 'ai-6', 'ai-7'];
const TRANSPORTS = ['sse', 'live', 'live-sse', 'seed-live', 'seed-sse'];
const ANSWERING = ['standard', 'seed', 'one-at-a-time'];
const INTERESTING_HEADERS = ['content-type', 'cache-control', 'x-vercel-ai-ui-message-stream', 'x-accel-buffering'];

const log = (...args) => console.error('[chat.mjs]', ...args);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class HarnessError extends Error {
  name = 'HarnessError';
}

// ---------------------------------------------------------------------------------------------------------------
// SSE parsing, shared by the tee of chat requests and by raw post/replay.

function newSseRecord() {
  return { chunks: [], done: 0, doneLast: false, comments: 0 };
}

// Feeds decoded text into `record`; returns the unconsumed tail (an incomplete line).
function feedSse(record, state, text) {
  state.buffer += text;
  const lines = state.buffer.split(/\r\n|\r|\n/);
  state.buffer = lines.pop();
  for (const line of lines) {
    if (line === '') {
      dispatchSseEvent(record, state);
    } else if (line.startsWith(':')) {
      record.comments += 1;
    } else if (line.startsWith('data:')) {
      // One optional space after the colon is part of the framing, per the SSE spec.
      state.data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
    }
    // `event:`, `id:`, `retry:` lines are legal SSE but the UI message stream never uses them.
  }
}

function dispatchSseEvent(record, state) {
  if (state.data.length === 0) return;
  const data = state.data.join('\n');
  state.data = [];
  if (data === '[DONE]') {
    record.done += 1;
    record.doneLast = true;
    return;
  }
  record.doneLast = false;
  try {
    record.chunks.push(JSON.parse(data));
  } catch {
    record.chunks.push(data);
  }
}

async function readSse(stream, record) {
  const state = { buffer: '', data: [] };
  const decoder = new TextDecoder();
  const reader = stream.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      feedSse(record, state, decoder.decode(value, { stream: true }));
    }
    feedSse(record, state, decoder.decode() + '\n\n'); // a final event may lack its blank line
  } catch (err) {
    record.streamError = String(err?.message ?? err);
  }
}

function pickHeaders(headers) {
  const out = {};
  for (const name of INTERESTING_HEADERS) {
    const value = headers.get(name);
    if (value != null) out[name] = value;
  }
  return out;
}

function isSse(response) {
  return (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

// ---------------------------------------------------------------------------------------------------------------
// ChatState: the same shape as @ai-sdk/react's ReactChatState (minus the React subscriptions).
// One class serves all three versions: the interface is identical in 6.0.0, 6.x and 7.x, except that 7.x adds an
// OPTIONAL `experimental_queuedMessages`; we leave it out, so a 7.x chat keeps its queue internally (and we never
// enable `experimental_queue`, which useChat leaves off by default too).

class PlainChatState {
  status = 'ready';
  error = undefined;
  #messages;

  constructor(messages = []) {
    this.#messages = messages;
  }

  get messages() {
    return this.#messages;
  }

  set messages(messages) {
    this.#messages = [...messages];
  }

  pushMessage = (message) => {
    this.#messages = this.#messages.concat(message);
  };

  popMessage = () => {
    this.#messages = this.#messages.slice(0, -1);
  };

  // Like React's state: store a copy, because the streaming state keeps mutating the message it hands over.
  replaceMessage = (index, message) => {
    this.#messages = [...this.#messages.slice(0, index), this.snapshot(message), ...this.#messages.slice(index + 1)];
  };

  snapshot = (thing) => structuredClone(thing);
}

// ---------------------------------------------------------------------------------------------------------------

async function loadClient(alias) {
  if (!CLIENTS.includes(alias)) throw new HarnessError(`unknown client ${JSON.stringify(alias)}; use one of ${CLIENTS}`);
  const pkg = JSON.parse(readFileSync(new URL(`./node_modules/${alias}/package.json`, import.meta.url), 'utf8'));
  const ai = await import(alias);
  for (const name of ['AbstractChat', 'DefaultChatTransport', 'lastAssistantMessageIsCompleteWithApprovalResponses']) {
    if (typeof ai[name] !== 'function') throw new HarnessError(`${alias}@${pkg.version} does not export ${name}`);
  }
  return { ai, version: pkg.version };
}

function plain(value) {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

function headersObject(init) {
  return Object.fromEntries(new Headers(init ?? {}).entries());
}

async function main() {
  const started = Date.now();
  const scenario = JSON.parse(readFileSync(0, 'utf8'));
  const { client, api, chatId, steps = [] } = scenario;
  const base = scenario.base ?? (api ? new URL(api).origin : undefined);
  const timeoutMs = scenario.timeoutMs ?? 20_000;
  const maxRequests = scenario.maxRequests ?? 10;
  if (typeof api !== 'string') throw new HarnessError('scenario.api is required');
  if (typeof chatId !== 'string') throw new HarnessError('scenario.chatId is required');
  const initialMessages = scenario.messages ?? [];
  if (!Array.isArray(initialMessages)) throw new HarnessError('scenario.messages must be an array of UIMessages');

  const { ai, version } = await loadClient(client);
  log(`client ${client} = ai@${version}`);

  const transcript = {
    version,
    client,
    messages: [],
    status: undefined,
    errors: [],
    finishes: [],
    requests: [],
    raw: [],
    decisions: [],
  };
  const inFlight = new Set(); // promises that settle when a chat request's response has been fully read
  let runaway = false;

  // Every request the chat makes goes through here. The body is teed: the client consumes one branch exactly as
  // it would the original, and we parse the other.
  const recordingFetch = async (url, init = {}) => {
    const entry = {
      method: init.method ?? 'GET',
      url: String(url),
      headers: headersObject(init.headers),
      body: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
      ...newSseRecord(),
    };
    transcript.requests.push(entry);
    if (transcript.requests.length > maxRequests) {
      runaway = true;
      throw new Error(`harness: more than ${maxRequests} chat requests (runaway re-POST loop?)`);
    }
    let response;
    try {
      response = await fetch(url, init);
    } catch (err) {
      entry.fetchError = String(err?.message ?? err);
      throw err;
    }
    entry.status = response.status;
    entry.responseHeaders = pickHeaders(response.headers);
    if (!response.body || !isSse(response)) {
      // Not a stream (e.g. a 4xx JSON error): read it here and hand the client an identical copy.
      const text = await response.text();
      try {
        entry.json = JSON.parse(text);
      } catch {
        entry.text = text;
      }
      return new Response(response.status === 204 ? null : text, {
        status: response.status,
        statusText: response.statusText,
        headers: response.headers,
      });
    }
    const [forClient, forUs] = response.body.tee();
    const reading = readSse(forUs, entry);
    inFlight.add(reading);
    reading.finally(() => inFlight.delete(reading));
    return new Response(forClient, { status: response.status, statusText: response.statusText, headers: response.headers });
  };

  const kind = scenario.transport ?? 'sse';
  if (!TRANSPORTS.includes(kind)) throw new HarnessError(`unknown transport ${JSON.stringify(kind)}; one of ${TRANSPORTS}`);
  const live = kind === 'live' || kind === 'live-sse' || kind === 'seed-live';
  const ws = base.replace(/^http/, 'ws');
  let transport;
  if (kind === 'live' || kind === 'live-sse') {
    transport = new LiveChatTransport({
      url: `${ws}/api/live`,
      framing: kind === 'live-sse' ? 'sse' : 'json',
      onFrame: (direction, frame, text) => {
        transcript.frames.push(direction === 'in' ? { in: frame, raw: text } : { out: frame });
      },
    });
  } else if (kind === 'seed-live') {
    transport = new SeedChatTransport({
      url: `${ws}/live`,
      pingMs: scenario.pingMs,
      onFrame: (record) => transcript.frames.push(record),
    });
  } else if (kind === 'seed-sse') {
    transport = seedSseTransport(ai, { base, fetch: recordingFetch });
  } else {
    transport = new ai.DefaultChatTransport({
      api,
      fetch: recordingFetch,
      body: scenario.body,
      headers: scenario.headers,
    });
  }
  if (live) transcript.frames = [];
  transcript.acted = [];

  // Browser tools (scenario.browser): one that needs no approval runs as soon as its input is available, and
  // its result goes at once; one that needs approval runs when the user approves it, and its result goes with
  // the approval, in one message (seed 001). The chat sends automatically once every call of the last step is
  // answered: all results in, or all approvals answered and no approved browser call still running.
  const browser = scenario.browser ?? {};
  const lastStepParts = (messages) => {
    const message = messages.at(-1);
    if (message?.role !== 'assistant') return [];
    const start = message.parts.findLastIndex((part) => part.type === 'step-start');
    return message.parts.slice(start + 1).filter(ai.isToolUIPart);
  };
  const browserRunning = (messages) =>
    lastStepParts(messages).some(
      (part) => browser[ai.getToolName(part)]?.approval && part.state === 'approval-responded' && part.approval.approved,
    );
  const answering = scenario.answering ?? 'standard';
  if (!ANSWERING.includes(answering)) throw new HarnessError(`unknown answering ${JSON.stringify(answering)}`);
  let sendAutomaticallyWhen;
  if (answering !== 'standard') {
    sendAutomaticallyWhen = seedSendAutomaticallyWhen(ai, { everyApproval: answering === 'seed' });
  } else if (scenario.browser) {
    sendAutomaticallyWhen = (options) =>
      ai.lastAssistantMessageIsCompleteWithToolCalls(options) ||
      (ai.lastAssistantMessageIsCompleteWithApprovalResponses(options) && !browserRunning(options.messages));
  } else {
    sendAutomaticallyWhen = ai.lastAssistantMessageIsCompleteWithApprovalResponses;
  }

  // AbstractChat is abstract only in the TypeScript types; an empty subclass is what useChat's Chat class adds
  // beyond its React state. Same constructor options in all three versions; 7.x also takes `experimental_queue`
  // (left off, as in useChat by default).
  // 7.x makes `id` a lazy getter; passing it explicitly behaves the same everywhere.
  const chat = new (class extends ai.AbstractChat {})({
    id: chatId,
    state: new PlainChatState(structuredClone(initialMessages)),
    transport,
    sendAutomaticallyWhen,
    onToolCall: ({ toolCall }) => {
      const tool = browser[toolCall.toolName];
      if (tool === undefined || tool.approval) return;
      if (tool.acknowledged) {
        transcript.acted.push(plain({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, input: toolCall.input }));
        return;
      }
      // not awaited: onToolCall runs inside the stream's own job (the AI SDK docs say so)
      void chat.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: tool.output });
    },
    onError: (error) => {
      transcript.errors.push(String(error?.message ?? error));
    },
    // 6.0.0 already passes finishReason and the is* flags to onFinish; the shape is unchanged in 6.x and 7.x.
    onFinish: ({ finishReason, isAbort, isDisconnect, isError }) => {
      transcript.finishes.push(plain({ finishReason, isAbort, isDisconnect, isError }));
    },
  });

  const snapshotInto = () => {
    transcript.messages = plain(chat.messages);
    transcript.status = chat.status;
    const message = chat.error?.message;
    if (message !== undefined) transcript.error = message;
    else delete transcript.error;
  };

  const deadline = (what) => {
    const until = Date.now() + timeoutMs;
    return () => {
      if (runaway) throw new HarnessError(`runaway: the client made more than ${maxRequests} chat requests`);
      if (Date.now() > until) throw new HarnessError(`timeout after ${timeoutMs} ms: ${what}`);
    };
  };

  // Idle = status ready/error, no response body still being read, and that holds for a few polls in a row.
  // The automatic follow-up POST starts in the same microtask chain as the previous "ready" (all versions), so a
  // short stable window is enough to not mistake the gap between two requests for the end.
  const waitIdle = async (what, check) => {
    let stable = 0;
    while (stable < 3) {
      check();
      const idle = (chat.status === 'ready' || chat.status === 'error') && inFlight.size === 0;
      stable = idle ? stable + 1 : 0;
      await sleep(20);
    }
    log(`idle after ${what}: status=${chat.status} requests=${transcript.requests.length}`);
  };

  // Races a promise against the step deadline.
  const within = async (promise, check) => {
    let settled = false;
    const wrapped = promise.finally(() => {
      settled = true;
    });
    while (!settled) {
      check();
      await Promise.race([wrapped.catch(() => {}), sleep(25)]);
    }
    return wrapped;
  };

  const rawPost = async (body) => {
    const entry = { method: 'POST', url: api, headers: { 'content-type': 'application/json' }, body, ...newSseRecord() };
    transcript.raw.push(entry);
    let response;
    try {
      response = await fetch(api, { method: 'POST', headers: entry.headers, body: JSON.stringify(body) });
    } catch (err) {
      entry.fetchError = String(err?.message ?? err);
      return;
    }
    entry.status = response.status;
    entry.responseHeaders = pickHeaders(response.headers);
    if (response.body && isSse(response)) {
      await readSse(response.body, entry);
    } else {
      const text = await response.text();
      try {
        entry.json = JSON.parse(text);
      } catch {
        entry.text = text;
      }
    }
  };

  // Approvals seen per tool, in order of first appearance, so indices stay stable after decisions.
  const seenApprovals = new Map(); // tool -> [approval id]
  const authHeaders = { authorization: `Bearer ${scenario.token ?? ''}` };

  const pollPending = async () => {
    const url = `${base}/api/approvals?state=pending&chat=${encodeURIComponent(chatId)}`;
    const response = await fetch(url, { headers: authHeaders });
    if (!response.ok) throw new HarnessError(`GET ${url} -> ${response.status}: ${await response.text()}`);
    const { approvals = [] } = await response.json();
    const ordered = [...approvals].sort((a, b) => cmp(a.created_at, b.created_at) || cmp(a.id, b.id));
    for (const approval of ordered) {
      const tool = approval.call?.tool;
      const list = seenApprovals.get(tool) ?? [];
      if (!list.includes(approval.id)) list.push(approval.id);
      seenApprovals.set(tool, list);
    }
    return ordered;
  };

  // `sendSettledAt()` (inline form only) tells when the concurrent send finished: an approval that has not shown up
  // 2 s after that will not, so fail then instead of at the step timeout.
  const decide = async (decisions, check, sendSettledAt = () => undefined) => {
    for (const { tool, index = 0, approved, reason, delayMs = 0 } of decisions) {
      let approvalId;
      let lastSeen = [];
      while ((approvalId = seenApprovals.get(tool)?.[index]) === undefined) {
        const ids = () => lastSeen.map((a) => `${a.call?.tool}:${a.id}`).join(', ') || 'none';
        try {
          check();
        } catch (err) {
          throw new HarnessError(`${err.message} (pending approvals last seen: ${ids()}; chat status ${chat.status})`);
        }
        const settled = sendSettledAt();
        if (settled !== undefined && Date.now() - settled > 2000) {
          throw new HarnessError(
            `decide: ${tool}#${index} never became pending while the send ran (send finished with chat status ` +
              `${chat.status}, error ${JSON.stringify(chat.error?.message)}; pending approvals last seen: ${ids()})`,
          );
        }
        lastSeen = await pollPending();
        if (seenApprovals.get(tool)?.[index] === undefined) await sleep(50);
      }
      if (delayMs > 0) await within(sleep(delayMs), check);
      const payload = reason === undefined ? { approved } : { approved, reason };
      const response = await fetch(`${base}/api/approvals/${encodeURIComponent(approvalId)}/decision`, {
        method: 'POST',
        headers: { ...authHeaders, 'content-type': 'application/json' },
        body: JSON.stringify(payload),
      });
      const text = await response.text();
      let body;
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
      transcript.decisions.push({ tool, index, approval_id: approvalId, status: response.status, body });
      log(`decided ${tool}#${index} (${approvalId}) approved=${approved} -> ${response.status}`);
    }
  };

  const respond = async (responses) => {
    const last = chat.messages.findLast((m) => m.role === 'assistant');
    if (!last) throw new HarnessError('respond: there is no assistant message');
    // Resolve all ids first: responding changes part states, which would shift the indices.
    const targets = responses.map(({ tool, index = 0, nth, approved, reason }) => {
      const ofTool = last.parts.filter((p) => p.type === `tool-${tool}`);
      const part = nth === undefined ? ofTool.filter((p) => p.state === 'approval-requested')[index] : ofTool[nth];
      if (part?.state !== 'approval-requested') {
        const states = last.parts.filter((p) => p.type.startsWith('tool-')).map((p) => `${p.type}:${p.state}`);
        const which = nth === undefined ? `${tool}#${index}` : `${tool} call ${nth}`;
        throw new HarnessError(`respond: no ${which} in state approval-requested (tool parts: ${states})`);
      }
      return { id: part.approval.id, approved, reason, tool, toolCallId: part.toolCallId };
    });
    for (const { id, approved, reason, tool, toolCallId } of targets) {
      // Same name and argument shape in 6.0.0, 6.x and 7.x. 6.x/7.x also accept `options` (request options for the
      // automatic send); we never pass it, so the follow-up body is the plain transport body in every version.
      await chat.addToolApprovalResponse(reason === undefined ? { id, approved } : { id, approved, reason });
      if (approved && browser[tool]?.approval) await chat.addToolOutput({ tool, toolCallId, output: browser[tool].output });
    }
  };

  try {
    for (const [i, step] of steps.entries()) {
      const check = deadline(`step ${i} ${JSON.stringify(step)}`);
      if ('send' in step) {
        // sendMessage never rejects for server errors (they go to onError / status "error"), but a harness-side
        // exception must not leave a dangling promise either.
        const sending = chat.sendMessage({ text: step.send });
        let settledAt;
        const markSettled = () => {
          settledAt = Date.now();
        };
        sending.then(markSettled, markSettled);
        if (step.decide) await decide(step.decide, check, () => settledAt);
        await within(sending, check);
        await waitIdle(`send ${JSON.stringify(step.send)}`, check);
      } else if ('decide' in step) {
        await decide(step.decide, check);
      } else if ('respond' in step) {
        await within(respond(step.respond), check);
        await waitIdle('respond', check);
      } else if ('sleep' in step) {
        await within(sleep(step.sleep), check);
      } else if ('resume' in step) {
        await within(chat.resumeStream(), check);
        await waitIdle('resume', check);
      } else if ('post' in step) {
        await within(rawPost(step.post), check);
      } else if ('replay' in step) {
        const original = transcript.requests[step.replay];
        if (!original) throw new HarnessError(`replay: no request #${step.replay} (${transcript.requests.length} made)`);
        await within(rawPost(original.body), check);
      } else {
        throw new HarnessError(`unknown step ${JSON.stringify(step)}`);
      }
    }
  } catch (err) {
    snapshotInto();
    transcript.elapsedMs = Date.now() - started;
    if (live) transport.close();
    if (scenario.reportStuck && err instanceof HarnessError) {
      transcript.stuck = err.message;
      log(`stuck: ${err.message}`);
      await new Promise((resolve) => process.stdout.write(`${JSON.stringify(transcript)}\n`, resolve));
      return 0;
    }
    log(`HARNESS FAILURE: ${err.stack ?? err}`);
    log(`partial transcript: ${JSON.stringify(transcript)}`);
    return 1;
  }

  snapshotInto();
  transcript.elapsedMs = Date.now() - started;
  if (live) transport.close();
  await new Promise((resolve) => process.stdout.write(`${JSON.stringify(transcript)}\n`, resolve));
  return 0;
}

function cmp(a, b) {
  if (a === b || a == null || b == null) return 0;
  return a < b ? -1 : 1;
}

main()
  .then((code) => process.exit(code))
  .catch((err) => {
    log(`HARNESS FAILURE: ${err.stack ?? err}`);
    process.exit(1);
  });
