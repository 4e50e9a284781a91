// End-to-end scenarios for signoff's two pages (the chat at / and the approvals inbox at /approvals), run in
// the system Chromium through playwright-core against a running `signoff demo`.
//
// Usage: SIGNOFF_BASE=http://127.0.0.1:8000 SIGNOFF_TOKEN=... SIGNOFF_ARTIFACTS=artifacts/screenshots \
//        [SIGNOFF_PRINCIPALS='{"alice": "sop_...", "bob": "sop_..."}'] node tests/js/page.mjs <scenario>
//
// SIGNOFF_TOKEN is the demo's admin token (principal `admin`); SIGNOFF_PRINCIPALS the personal tokens of two
// principals with the role finance, by name, which the `quorum` scenario needs (`signoff principals add`).
// Each chat page talks as its own browser session's principal (`browser:<id>`).
//
// On success it prints one JSON object on stdout, what the scenario reports for checks of the ledger (e.g.
// `{"chat": "<chat id>", "me": "browser:<id>"}`); the live-* scenarios drive the page over the live socket
// (?transport=live).
//
// Each scenario runs in a fresh browser context with chats of its own, and saves a screenshot of each key
// state as $SIGNOFF_ARTIFACTS/<scenario>-<nn>-<state>.png. It exits 1 with a message naming the step when an
// expectation is not met, and also on any console error or warning, uncaught page error, failed request or
// HTTP error answer that the step did not expect (a reload may abort the requests of the page it leaves).
// Progress goes to stderr, one line per step.
//
// Browser: /usr/bin/chromium (never downloaded), headless.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];
const WAIT_MS = 15_000;
const PAID_HANAKO = 'Paid 50 USD to Hanako; the balance is 950 USD.';

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const TOKEN = process.env.SIGNOFF_TOKEN ?? '';
const PRINCIPALS = JSON.parse(process.env.SIGNOFF_PRINCIPALS || '{}');
const ARTIFACTS = process.env.SIGNOFF_ARTIFACTS ?? 'artifacts/screenshots';

// -- the run: steps, screenshots, and everything the pages must not do -----------------------------------------

class Failure extends Error {}

class Run {
  constructor(scenario) {
    this.scenario = scenario;
    this.step = 'start';
    this.shots = 0;
    this.problems = [];
    this.allowed = []; // [{pattern, left}] console texts / HTTP errors the current step expects
    this.generation = 0; // bumped on each reload: requests of a left page may be aborted
    this.requestGeneration = new WeakMap();
    this.closing = false;
    this.report = {}; // printed on stdout when the scenario passes
  }

  async do(step, action) {
    this.step = step;
    console.error(`[${this.scenario}] ${step}`);
    try {
      await action();
    } catch (error) {
      throw new Failure(`step "${step}" failed: ${error.message.split('\n')[0]}`);
    }
    this.check();
    for (const { pattern, left } of this.allowed) {
      if (left > 0 && process.env.SIGNOFF_PAGE_DEBUG) console.error(`  (${left} allowed ${pattern} unused)`);
    }
    this.allowed = []; // what a step allows ends with it
  }

  check() {
    if (this.problems.length > 0) {
      throw new Failure(`step "${this.step}": the page misbehaved:\n  ${this.problems.join('\n  ')}`);
    }
  }

  /** Lets `count` console messages or HTTP error answers matching `pattern` pass (e.g. an expected 409). */
  allow(pattern, count = 1) {
    this.allowed.push({ pattern, left: count });
  }

  expected(text) {
    const hit = this.allowed.find((a) => a.left > 0 && a.pattern.test(text));
    if (hit) hit.left -= 1;
    return Boolean(hit);
  }

  problem(text) {
    if (!this.closing && !this.expected(text)) this.problems.push(text);
  }

  watch(page, label) {
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') {
        const where = message.location()?.url ? ` (${message.location().url})` : '';
        this.problem(`${label}: console ${message.type()}: ${message.text()}${where}`);
      }
    });
    page.on('pageerror', (error) => this.problem(`${label}: uncaught ${error.name}: ${error.message}`));
    page.on('request', (request) => this.requestGeneration.set(request, this.generation));
    page.on('requestfailed', (request) => {
      const reason = request.failure()?.errorText ?? 'failed';
      const left = this.requestGeneration.get(request) !== this.generation;
      if (!(left && reason === 'net::ERR_ABORTED')) {
        this.problem(`${label}: request failed: ${request.method()} ${request.url()}: ${reason}`);
      }
    });
    page.on('response', (response) => {
      if (response.status() >= 400) {
        this.problem(`${label}: HTTP ${response.status()} for ${response.request().method()} ${response.url()}`);
      }
    });
  }

  async shot(page, state) {
    this.shots += 1;
    const path = join(ARTIFACTS, `${this.scenario}-${String(this.shots).padStart(2, '0')}-${state}.png`);
    await page.screenshot({ path, fullPage: true });
  }

  async reload(page) {
    this.generation += 1;
    await page.reload();
  }
}

// -- page helpers ------------------------------------------------------------------------------------------------

/** Records, in the page, each tool card's states and heights from the moment it appears. */
function recordCards() {
  const cards = (window.__cards = {});
  const sizes = new ResizeObserver((entries) => {
    for (const { target } of entries) note(target);
  });
  const note = (card) =>
    (cards[card.dataset.callId] ??= []).push({
      state: card.dataset.state,
      height: Math.round(card.getBoundingClientRect().height),
    });
  const observe = (node) => {
    if (node.nodeType !== 1) return;
    for (const card of [node, ...node.querySelectorAll('[data-testid="tool-card"]')]) {
      if (card.matches('[data-testid="tool-card"]')) {
        note(card);
        sizes.observe(card);
      }
    }
  };
  new MutationObserver((mutations) => {
    for (const mutation of mutations) {
      if (mutation.type === 'attributes') note(mutation.target);
      mutation.addedNodes.forEach(observe);
    }
  }).observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-state'] });
}

async function newContext(browser, options = {}) {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, ...options });
  await context.addInitScript(recordCards);
  await context.addInitScript(countTones);
  return context;
}

// Counts the tones the page starts (window.__tones), so a test sees that change_bgm played, not only that
// the model said so: an acknowledged call is the page's to act on, and nothing of it comes back.
function countTones() {
  window.__tones = 0;
  const start = OscillatorNode.prototype.start;
  OscillatorNode.prototype.start = function (...args) {
    window.__tones += 1;
    return start.apply(this, args);
  };
}

async function expectTones(page, least) {
  await page.waitForFunction((n) => window.__tones >= n, least, { timeout: WAIT_MS }).catch(async () => {
    throw new Error(`the page started ${await page.evaluate(() => window.__tones)} tones, not ${least}`);
  });
}

function chatId(run, label = '') {
  return [run.scenario, label, Math.random().toString(36).slice(2, 10)].filter(Boolean).join('-');
}

async function openChat(run, context, { wait, transport, label = 'chat' } = {}) {
  const id = chatId(run, wait);
  const page = await context.newPage();
  run.watch(page, label);
  const posts = [];
  page.on('request', (request) => {
    if (request.method() === 'POST' && new URL(request.url()).pathname === '/api/chat') posts.push(request);
  });
  const sockets = watchSockets(page);
  const query = new URLSearchParams({ chat: id, ...(wait && { wait }), ...(transport && { transport }) });
  await page.goto(`${BASE}/?${query}`);
  await page.getByTestId('status').waitFor({ timeout: WAIT_MS });
  return { page, id, posts, sockets, me: await whoIs(page) };
}

/** The principal the page talks as: its browser session's, from the cookie the page's first load set. */
function whoIs(page) {
  return page.evaluate(async () => (await fetch('/api/me')).json());
}

/** The REST API from this script (no browser), as the principal of a bearer token; every POST is JSON, as the
 * server requires. Resolves to the status and the parsed body. */
async function api(token, method, path, body) {
  const post = method === 'POST';
  const response = await fetch(`${BASE}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(post && { 'content-type': 'application/json' }) },
    ...(post && { body: JSON.stringify(body ?? {}) }),
  });
  return { status: response.status, body: await response.json().catch(() => undefined) };
}

/** The page's WebSockets to /api/live and their frames: `sent` holds the parsed frames the page sent, each with
 * its `kind` (see frameKind), `turns` counts the `[DONE]` frames it received (one per turn), `received` the
 * chunk types. */
function watchSockets(page) {
  const seen = { opened: 0, sent: [], turns: 0, received: [] };
  const results = new Set(); // the calls the server sent a result for, on any of the page's sockets
  page.on('websocket', (socket) => {
    if (new URL(socket.url()).pathname !== '/api/live') return;
    seen.opened += 1;
    socket.on('framesent', ({ payload }) => {
      if (process.env.SIGNOFF_PAGE_DEBUG) console.error(`  sent ${String(payload).slice(0, 300)}`);
      const frame = JSON.parse(String(payload));
      seen.sent.push({ ...frame, kind: frameKind(frame, results) });
    });
    socket.on('framereceived', ({ payload }) => {
      if (process.env.SIGNOFF_PAGE_DEBUG) console.error(`  received ${String(payload).slice(0, 200)}`);
      if (payload === '[DONE]') {
        seen.turns += 1;
        return;
      }
      const chunk = JSON.parse(String(payload));
      seen.received.push(chunk.type);
      if (/^tool-output-(available|error|denied)$/.test(chunk.type)) results.add(chunk.toolCallId);
    });
  });
  return seen;
}

const ANSWERS = new Set(['approval-responded', 'output-available', 'output-error']);

/** What a frame the page sent is: `message`, `resume`, `interrupt`, `ping`, or for a message whose last message
 * is the assistant's (an answer to the running turn, which carries the whole conversation), `answer:` and the
 * answers in it: each tool part of the last step that the server sent no result for, by its state
 * (`approval-responded`, `output-available`, `output-error`; `approval-responded+output-available` for a
 * browser tool's approval and output in one part), in order and space-separated; `answer:nothing` if none. */
function frameKind(frame, results) {
  const last = frame.messages?.at(-1);
  if (frame.type !== 'message' || last?.role !== 'assistant') return frame.type;
  const start = last.parts.findLastIndex((part) => part.type === 'step-start');
  const answers = last.parts
    .slice(start + 1)
    .filter((part) => part.toolCallId && !results.has(part.toolCallId) && ANSWERS.has(part.state))
    .map((part) =>
      part.state !== 'approval-responded' && part.approval?.approved !== undefined
        ? `approval-responded+${part.state}`
        : part.state,
    );
  return `answer:${answers.join(' ') || 'nothing'}`;
}

/** The kinds of frames the page sent, pings left out (see frameKind). */
function sentKinds(sockets) {
  return sockets.sent.filter((frame) => frame.type !== 'ping').map((frame) => frame.kind);
}

function expectFrames(sockets, { sent, turns, opened = 1 }) {
  const kinds = sentKinds(sockets);
  if (kinds.join() !== sent.join()) throw new Error(`the page sent ${kinds.join(', ')}, not ${sent.join(', ')}`);
  if (sockets.turns !== turns) throw new Error(`the page got ${sockets.turns} [DONE] frames, not ${turns}`);
  if (sockets.opened !== opened) throw new Error(`the page opened ${sockets.opened} live sockets, not ${opened}`);
}

async function expectLive(page) {
  await expectText(page, page.getByTestId('transport'), 'live', 'the header');
  await expectText(page, page.getByTestId('wait-mode'), 'blocking', 'the header');
}

async function openInbox(run, context, label = 'inbox', token = TOKEN) {
  const page = await context.newPage();
  run.watch(page, label);
  await page.goto(`${BASE}/approvals`);
  await page.getByTestId('token-input').fill(token);
  await page.getByTestId('token-submit').click();
  await page.locator('[data-testid="feed-state"]', { hasText: 'Live' }).waitFor({ timeout: WAIT_MS });
  return page;
}

async function say(page, text) {
  await page.getByTestId('chat-input').fill(text);
  await page.getByTestId('send').click();
}

/** A live chat asks for two payments and its page approves Jiro's: nothing is sent while Saburo's still asks,
 * and the turn waits. */
async function liveTwoPaymentsJiroApproved(run, browser) {
  const context = await newContext(browser);
  const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
  Object.assign(run.report, { chat: id, me: me.id });
  const [jiro, saburo] = [cardOf(page, 'process_payment', 0), cardOf(page, 'process_payment', 1)];
  await run.do('ask for two payments', async () => {
    await say(page, 'pay 10 USD to Jiro and 20 USD to Saburo');
    await expectCard(page, jiro, 'asking', 'Jiro');
    await expectCard(page, saburo, 'asking', 'Saburo');
  });
  await run.do('approve Jiro: nothing is sent while Saburo still asks, and the turn waits', async () => {
    await jiro.getByTestId('approve').click();
    await expectCard(page, jiro, 'approved', 'Jiro');
    await page.waitForTimeout(300);
    await expectCard(page, saburo, 'asking', 'Saburo');
    expectFrames(sockets, { sent: ['message'], turns: 0 });
  });
  return { context, page, id, posts, sockets, jiro, saburo };
}

const cardOf = (page, tool, index = 0) => page.locator(`[data-testid="tool-card"][data-tool="${tool}"]`).nth(index);

async function expectCard(page, card, state, what) {
  try {
    await card.and(page.locator(`[data-state="${state}"]`)).waitFor({ timeout: WAIT_MS });
  } catch {
    const actual = await card.getAttribute('data-state', { timeout: 500 }).catch(() => 'not shown');
    const note = await card.getByTestId('card-note').textContent({ timeout: 500 }).catch(() => '');
    throw new Error(`the ${what} card should be "${state}" but is "${actual}"${note ? ` (${note})` : ''}`);
  }
}

async function expectText(page, locator, text, what) {
  try {
    await locator.filter({ hasText: text }).first().waitFor({ timeout: WAIT_MS });
  } catch {
    const shown = (await locator.allTextContents()).join(' | ');
    throw new Error(`${what} should contain ${JSON.stringify(text)}; it shows ${JSON.stringify(shown)}`);
  }
}

const replies = (page) => page.locator('[data-testid="message"][data-role="assistant"]');

async function expectReply(page, text) {
  await expectText(page, replies(page), text, 'the reply');
}

async function expectHeadline(card, text) {
  const shown = await card.getByTestId('headline').textContent();
  if (shown !== text) throw new Error(`the card headline is ${JSON.stringify(shown)}, not ${JSON.stringify(text)}`);
}

/** A card must not change size while it runs and asks: it appears at its final size. */
async function expectSteadyCard(page, card) {
  const callId = await card.getAttribute('data-call-id');
  const history = await page.evaluate((id) => window.__cards[id] ?? [], callId);
  const early = history.filter((entry) => entry.state === 'running' || entry.state === 'asking');
  const heights = [...new Set(early.map((entry) => entry.height))];
  if (heights.length > 1) throw new Error(`the card changed size while asking: ${JSON.stringify(history)}`);
}

async function statesOf(page, card) {
  const callId = await card.getAttribute('data-call-id');
  return (await page.evaluate((id) => window.__cards[id] ?? [], callId)).map((entry) => entry.state);
}

async function deny(card, reason) {
  await card.getByTestId('deny').click();
  await card.getByTestId('deny-reason').fill(reason);
  await card.getByTestId('deny-confirm').click();
}

/** Where the end of a long value shows: the box of the last `text` in `locator`'s text (a range of exactly those
 * characters, not its element, whose box may be clipped), in the page's coordinates, and the viewport's width. */
function whereEnds(locator, text) {
  return locator.evaluate((element, text) => {
    const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
    let found;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const at = node.data.lastIndexOf(text);
      if (at >= 0) found = { node, at };
    }
    if (!found) return undefined;
    const range = document.createRange();
    range.setStart(found.node, found.at);
    range.setEnd(found.node, found.at + text.length);
    const { left, right } = range.getBoundingClientRect();
    return { left: left + scrollX, right: right + scrollX, viewport: innerWidth };
  }, text);
}

/** `text`, at the end of a long value in `locator`, shows within the viewport's width. */
async function expectEndShown(locator, text, what) {
  const end = await whereEnds(locator, text);
  if (!end) throw new Error(`${what} does not show ${JSON.stringify(text)}`);
  if (end.left < 0 || end.right > end.viewport) {
    throw new Error(
      `${what}: ${JSON.stringify(text)} shows at x ${Math.round(end.left)}-${Math.round(end.right)}, ` +
        `outside the viewport's ${end.viewport} pixels`,
    );
  }
}

/** The inbox row of approval `id` is marked as the one the link names, and shows whole in the viewport. */
async function expectLinked(page, id, what) {
  await page.locator(`[data-approval-id="${id}"][aria-current="true"]`).waitFor({ timeout: WAIT_MS });
  try {
    await page.waitForFunction(
      (approvalId) => {
        const box = document.querySelector(`[data-approval-id="${approvalId}"]`).getBoundingClientRect();
        return box.top >= 0 && box.bottom <= window.innerHeight;
      },
      id,
      { timeout: WAIT_MS },
    );
  } catch {
    throw new Error(`${what} is marked but not scrolled into view`);
  }
}

/** Nothing on the page is wider than the viewport: it never scrolls sideways. */
async function expectNoSidewaysScroll(page, what) {
  const { wide, viewport } = await page.evaluate(() => ({
    wide: document.scrollingElement.scrollWidth,
    viewport: innerWidth,
  }));
  if (wide > viewport) throw new Error(`${what} is ${wide} pixels wide, wider than the viewport's ${viewport}`);
}

/** A button shows, and within the viewport's width. */
async function expectButtonShown(page, button, what) {
  await button.scrollIntoViewIfNeeded({ timeout: WAIT_MS });
  const box = await button.boundingBox();
  const viewport = await page.evaluate(() => innerWidth);
  if (!(await button.isVisible()) || !box || box.x < 0 || box.x + box.width > viewport) {
    throw new Error(`${what} is not shown within the viewport (at ${JSON.stringify(box)}, ${viewport} wide)`);
  }
}

function inboxRow(inbox, chat) {
  return inbox.locator('[data-testid="approval-row"]').filter({ has: inbox.locator(`a:text-is("${chat}")`) });
}

function count(posts, expected, what) {
  if (posts.length !== expected) {
    throw new Error(`${what}: the page sent ${posts.length} chat requests, not ${expected}`);
  }
}

// -- scenarios ---------------------------------------------------------------------------------------------------

async function payAndAsk(run, page) {
  const card = cardOf(page, 'process_payment');
  await run.do('ask: pay 50 USD to Hanako', async () => {
    await say(page, 'pay 50 USD to Hanako');
    await expectCard(page, card, 'asking', 'payment');
    await expectHeadline(card, 'Pay 50 USD to Hanako');
    await expectText(page, card.getByTestId('args'), 'Hanako', 'the card arguments');
    await card.getByTestId('deadline').waitFor();
    await expectSteadyCard(page, card);
  });
  return card;
}

/** Ask for `export report <name>` and approve it: the card shows the task's progress bar. */
async function exportApproved(run, page, name) {
  const card = cardOf(page, 'export_report');
  await run.do(`ask: export report ${name}`, async () => {
    await say(page, `export report ${name}`);
    await expectCard(page, card, 'asking', 'export');
  });
  const task = card.getByTestId('task');
  await run.do('approve: the task starts with a progress bar and a Cancel button', async () => {
    await card.getByTestId('approve').click();
    await task.getByRole('progressbar').waitFor({ timeout: WAIT_MS });
    await task.getByTestId('task-cancel').waitFor();
  });
  return { card, task };
}

async function progressOf(task) {
  return Number(await task.getByRole('progressbar').getAttribute('aria-valuenow', { timeout: WAIT_MS }));
}

const SCENARIOS = {
  async 'export-report'(run, browser) {
    const context = await newContext(browser);
    const { page, posts } = await openChat(run, context);
    const { task } = await exportApproved(run, page, 'q3');
    await run.do('the progress bar moves', async () => {
      const first = await progressOf(task);
      const until = Date.now() + WAIT_MS;
      while ((await progressOf(task)) < first + 15) {
        if (Date.now() > until) throw new Error(`the progress bar stayed near ${first}%`);
        await page.waitForTimeout(100);
      }
      await expectText(page, task.getByTestId('task-message'), 'ing', 'the task message');
    });
    await run.shot(page, 'progress');
    await run.do('the result appears when the task completes', async () => {
      await task.and(page.locator('[data-state="completed"]')).waitFor({ timeout: 30_000 });
      await expectText(page, task.getByTestId('task-result'), 'q3.pdf', 'the task result');
      count(posts, 2, 'an approved export');
    });
    await run.shot(page, 'completed');
    await run.do('the next turn sees the result', async () => {
      await say(page, 'thanks');
      await expectReply(page, 'The report q3 is done');
    });
  },

  async 'export-cancel'(run, browser) {
    const context = await newContext(browser);
    const { page, posts } = await openChat(run, context);
    const { task } = await exportApproved(run, page, 'q4');
    await run.do('Cancel stops the task', async () => {
      await task.getByTestId('task-cancel').click();
      await task.and(page.locator('[data-state="cancelled"]')).waitFor({ timeout: WAIT_MS });
      await expectText(page, task, 'Cancelled', 'the task');
      count(posts, 2, 'a cancelled export');
    });
    await run.shot(page, 'cancelled');
    await run.do('the next turn hears it was cancelled', async () => {
      await say(page, 'and now?');
      await expectReply(page, 'The report q4 cancelled');
    });
  },

  async 'pay-approve'(run, browser) {
    const context = await newContext(browser);
    const { page, posts } = await openChat(run, context);
    await run.shot(page, 'empty');
    const card = await payAndAsk(run, page);
    await run.shot(page, 'asking');
    await run.do('approve', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      count(posts, 2, 'deferred approval');
    });
    await run.shot(page, 'done');
  },

  async 'pay-deny'(run, browser) {
    const context = await newContext(browser);
    const { page } = await openChat(run, context);
    const card = await payAndAsk(run, page);
    await run.do('deny with a reason', async () => {
      await card.getByTestId('deny').click();
      await card.getByTestId('deny-reason').fill('not this month');
    });
    await run.shot(page, 'deny-reason');
    await run.do('the card is refused and the model quotes the reason', async () => {
      await card.getByTestId('deny-confirm').click();
      await expectCard(page, card, 'refused', 'payment');
      await expectText(page, card.getByTestId('card-note'), 'not this month', 'the card');
      await expectReply(page, 'not this month');
    });
    await run.shot(page, 'refused');
  },

  async 'two-payments'(run, browser) {
    const context = await newContext(browser);
    const { page, posts } = await openChat(run, context);
    const [jiro, saburo] = [cardOf(page, 'process_payment', 0), cardOf(page, 'process_payment', 1)];
    await run.do('ask for two payments', async () => {
      await say(page, 'pay 10 USD to Jiro and 20 USD to Saburo');
      await expectCard(page, jiro, 'asking', 'Jiro');
      await expectCard(page, saburo, 'asking', 'Saburo');
      await expectHeadline(jiro, 'Pay 10 USD to Jiro');
      await expectHeadline(saburo, 'Pay 20 USD to Saburo');
      await saburo.getByTestId('deadline').waitFor();
    });
    await run.shot(page, 'asking');
    await run.do('approve Jiro: nothing is sent while Saburo still asks', async () => {
      await jiro.getByTestId('approve').click();
      await expectCard(page, jiro, 'approved', 'Jiro');
      await page.waitForTimeout(300);
      count(posts, 1, 'one of two answered');
    });
    await run.do('deny Saburo: both end right', async () => {
      await deny(saburo, 'too much');
      await expectCard(page, jiro, 'done', 'Jiro');
      await expectCard(page, saburo, 'refused', 'Saburo');
      await expectReply(page, 'Paid 10 USD to Jiro; the balance is 990 USD.');
      await expectReply(page, 'I did not pay 20 USD to Saburo');
      await expectReply(page, 'too much');
      count(posts, 2, 'both answered');
    });
    await run.shot(page, 'done');
  },

  async 'location-granted'(run, browser) {
    const context = await newContext(browser, {
      permissions: ['geolocation'],
      geolocation: { latitude: 35.6762, longitude: 139.6503 },
    });
    for (const wait of [undefined, 'blocking']) {
      const mode = wait ?? 'deferred';
      const { page } = await openChat(run, context, { wait, label: `chat (${mode})` });
      const card = cardOf(page, 'get_location');
      await run.do(`${mode}: ask: where am I`, async () => {
        await say(page, 'where am I');
        await expectCard(page, card, 'asking', 'location');
        await expectHeadline(card, "Share this browser's location");
      });
      await run.shot(page, `${mode}-asking`);
      await run.do(`${mode}: approve: the browser shares its location`, async () => {
        await card.getByTestId('approve').click();
        await expectCard(page, card, 'done', 'location');
        await expectReply(page, 'You are at 35.6762, 139.6503.');
      });
      await run.shot(page, `${mode}-done`);
      await page.close();
    }
  },

  async 'location-denied'(run, browser) {
    const context = await newContext(browser);
    const { page } = await openChat(run, context);
    const card = cardOf(page, 'get_location');
    await run.do('ask: where am I', async () => {
      await say(page, 'where am I');
      await expectCard(page, card, 'asking', 'location');
    });
    await run.do('approve, but the browser refuses: an error, not a made-up location', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'error', 'location');
      await expectText(page, card.getByTestId('card-note'), 'the browser did not share the location', 'the card');
      await expectReply(page, 'get_location failed');
      const said = (await replies(page).allTextContents()).join(' ');
      if (said.includes('You are at')) throw new Error(`the reply claims a location: ${said}`);
    });
    await run.shot(page, 'error');
  },

  async 'location-silent'(run, browser) {
    const context = await newContext(browser);
    // A browser that never answers (a permission prompt nobody clicks): the server's deadline must end it.
    await context.addInitScript(() => {
      navigator.geolocation.getCurrentPosition = () => {};
    });
    const { page } = await openChat(run, context);
    const card = cardOf(page, 'get_location');
    await run.do('ask: where am I', async () => {
      await say(page, 'where am I');
      await expectCard(page, card, 'asking', 'location');
    });
    await run.do('approve; no result comes: the model hears it failed, and the open page follows', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'error', 'location');
      await expectText(page, card.getByTestId('card-note'), 'the browser returned no result within', 'the card');
      await expectReply(page, 'get_location failed: the browser returned no result within');
    });
    await run.shot(page, 'timed-out');
  },

  async play(run, browser) {
    const context = await newContext(browser);
    for (const wait of [undefined, 'blocking']) {
      const mode = wait ?? 'deferred';
      const { page, posts } = await openChat(run, context, { wait, label: `chat (${mode})` });
      const card = cardOf(page, 'change_bgm');
      await run.do(`${mode}: play lofi beats: runs in the browser without asking`, async () => {
        await say(page, 'play lofi beats');
        await expectCard(page, card, 'done', 'music');
        await expectHeadline(card, 'Play lofi beats');
        await expectReply(page, 'Now playing lofi beats.');
        await expectTones(page, 2);
        const states = await statesOf(page, card);
        if (states.includes('asking')) throw new Error(`the card asked for approval: ${states.join(' → ')}`);
        count(posts, 1, mode);
      });
      await run.shot(page, `${mode}-done`);
      await page.close();
    }
  },

  async 'inbox-blocking'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts } = await openChat(run, context, { wait: 'blocking' });
    const card = await payAndAsk(run, page);
    const inbox = await context.newPage();
    run.watch(inbox, 'inbox');
    await run.do('the inbox refuses a wrong token', async () => {
      await inbox.goto(`${BASE}/approvals`);
      await inbox.getByTestId('token-input').fill('not-the-token');
      run.allow(/401/, 2); // the answer itself, and Chromium's "Failed to load resource" line about it
      await inbox.getByTestId('token-submit').click();
      await expectText(inbox, inbox.getByTestId('token-error'), 'wrong token', 'the login form');
    });
    await run.shot(inbox, 'inbox-wrong-token');
    const row = inboxRow(inbox, id);
    await run.do('sign in as the admin: the pending payment shows live', async () => {
      await inbox.getByTestId('token-input').fill(TOKEN);
      await inbox.getByTestId('token-submit').click();
      await expectText(inbox, inbox.getByTestId('whoami'), 'Signed in as admin (admin)', 'the header');
      await row.waitFor({ timeout: WAIT_MS });
      await expectText(inbox, row.getByTestId('description'), 'Pay 50 USD to Hanako', 'the inbox row');
      await expectText(inbox, row, 'process_payment', 'the inbox row');
      await expectText(inbox, row, 'asked', 'the inbox row');
    });
    await run.shot(inbox, 'inbox-pending');
    await run.do('approve from the inbox: the open chat stream goes on', async () => {
      await row.getByTestId('reason').fill('ok from the inbox');
      await row.getByTestId('approve').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      const recent = inbox.getByTestId('recent-row').filter({ hasText: 'Pay 50 USD to Hanako' });
      await expectText(inbox, recent.getByTestId('decided-by'), 'admin', 'the recent decision');
      await expectText(page, card.getByTestId('card-note'), 'approved by admin', 'the chat card');
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      count(posts, 1, 'blocking: one stream');
    });
    await run.shot(inbox, 'inbox-decided');
    await run.shot(page, 'chat-done');
  },

  async 'inbox-race'(run, browser) {
    const context = await newContext(browser);
    const { page, id } = await openChat(run, context, { wait: 'blocking' });
    const card = await payAndAsk(run, page);
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id);
    await run.do('the chat denies while the inbox approves: the loser is told', async () => {
      await row.waitFor({ timeout: WAIT_MS });
      await card.getByTestId('deny').click();
      await card.getByTestId('deny-reason').fill('changed my mind');
      run.allow(/409|Conflict/, 2); // the loser's answer, and Chromium's "Failed to load resource" line
      // Both clicks go out within a few milliseconds (no actionability waits), well inside the feed's interval.
      const press = (button) => button.evaluate((element) => element.click());
      await Promise.all([press(card.getByTestId('deny-confirm')), press(row.getByTestId('approve'))]);
      // one of them is told it was already decided
      const chatLost = page.getByTestId('conflict');
      const inboxLost = inbox.getByTestId('conflict');
      await Promise.any([chatLost.waitFor({ timeout: WAIT_MS }), inboxLost.waitFor({ timeout: WAIT_MS })]);
      if (await chatLost.isVisible()) {
        await expectText(page, chatLost, 'already decided by admin', 'the chat card');
        await expectCard(page, card, 'done', 'payment');
        await expectReply(page, PAID_HANAKO);
      } else {
        await expectText(inbox, inboxLost, "already decided by the chat's user", 'the inbox');
        await expectCard(page, card, 'refused', 'payment');
        await expectReply(page, 'changed my mind');
      }
    });
    await run.shot(page, 'chat');
    await run.shot(inbox, 'inbox');
  },

  async 'reload-pending'(run, browser) {
    const context = await newContext(browser);
    for (const wait of [undefined, 'blocking']) {
      const mode = wait ?? 'deferred';
      const { page } = await openChat(run, context, { wait, label: `chat (${mode})` });
      const card = await payAndAsk(run, page);
      await run.do(`${mode}: reload while the card asks`, async () => {
        await run.reload(page);
        await expectCard(page, card, 'asking', 'payment');
        await expectHeadline(card, 'Pay 50 USD to Hanako');
        const roles = await page.locator('[data-testid="message"]').evaluateAll((ms) => ms.map((m) => m.dataset.role));
        if (roles.join() !== 'user,assistant') throw new Error(`after the reload the messages are ${roles.join()}`);
      });
      await run.shot(page, `${mode}-reloaded`);
      await run.do(`${mode}: approve after the reload`, async () => {
        await card.getByTestId('approve').click();
        await expectCard(page, card, 'done', 'payment');
        await expectReply(page, PAID_HANAKO);
      });
      await run.shot(page, `${mode}-done`);
      await page.close();
    }
  },

  async 'live-pay-approve'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    await run.do('the header says live', () => expectLive(page));
    const card = await payAndAsk(run, page);
    await run.shot(page, 'asking');
    await run.do('approve: the same turn pays, on one socket', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      await page.waitForTimeout(300); // anything sent late would show now
      expectFrames(sockets, { sent: ['message', 'answer:approval-responded'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-pay-deny'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = await payAndAsk(run, page);
    await run.do('deny with a reason: the card is refused and the model quotes the reason', async () => {
      await deny(card, 'not this month');
      await expectCard(page, card, 'refused', 'payment');
      await expectText(page, card.getByTestId('card-note'), 'not this month', 'the card');
      await expectReply(page, 'not this month');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      const said = (await replies(page).allTextContents()).join(' ');
      if (said.includes('Paid')) throw new Error(`the reply says it paid: ${said}`);
      expectFrames(sockets, { sent: ['message', 'answer:approval-responded'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'refused');
  },

  async 'live-location'(run, browser) {
    const context = await newContext(browser, {
      permissions: ['geolocation'],
      geolocation: { latitude: 35.6762, longitude: 139.6503 },
    });
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = cardOf(page, 'get_location');
    await run.do('ask: where am I', async () => {
      await say(page, 'where am I');
      await expectCard(page, card, 'asking', 'location');
      await expectHeadline(card, "Share this browser's location");
    });
    await run.do('approve: the browser shares its location, with the approval in one message of the turn', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'done', 'location');
      await expectReply(page, 'You are at 35.6762, 139.6503.');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message', 'answer:approval-responded+output-available'], turns: 1 });
      // the one answer carries the approval and the position the browser gave
      const answer = sockets.sent.find((frame) => frame.kind.startsWith('answer:'));
      const part = answer.messages.at(-1).parts.find((p) => p.type === 'tool-get_location');
      const { latitude, longitude } = part.output ?? {};
      if (part.approval?.approved !== true || latitude !== 35.6762 || longitude !== 139.6503) {
        throw new Error(`the answer's location part is ${JSON.stringify(part)}`);
      }
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-play'(run, browser) {
    const context = await newContext(browser);
    const { page, posts, sockets } = await openChat(run, context, { transport: 'live' });
    const card = cardOf(page, 'change_bgm');
    await run.do('play lofi beats: runs in the browser without asking, in one turn', async () => {
      await say(page, 'play lofi beats');
      await expectCard(page, card, 'done', 'music');
      await expectReply(page, 'Now playing lofi beats.');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      await expectTones(page, 2);
      const states = await statesOf(page, card);
      if (states.includes('asking')) throw new Error(`the card asked for approval: ${states.join(' → ')}`);
      expectFrames(sockets, { sent: ['message'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-reload'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = await payAndAsk(run, page);
    const before = { ...sockets, sent: [...sockets.sent] };
    await run.do('reload while the card asks: the page follows the turn again', async () => {
      Object.assign(sockets, { opened: 0, sent: [], turns: 0, received: [] });
      await run.reload(page);
      await expectLive(page);
      await expectCard(page, card, 'asking', 'payment');
      await expectHeadline(card, 'Pay 50 USD to Hanako');
      const roles = await page.locator('[data-testid="message"]').evaluateAll((ms) => ms.map((m) => m.dataset.role));
      if (roles.join() !== 'user,assistant') throw new Error(`after the reload the messages are ${roles.join()}`);
      expectFrames(before, { sent: ['message'], turns: 0 });
      expectFrames(sockets, { sent: ['resume'], turns: 0 });
    });
    await run.shot(page, 'reloaded');
    await run.do('approve after the reload, on the new socket', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['resume', 'answer:approval-responded'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-two-payments'(run, browser) {
    const { page, posts, sockets, jiro, saburo } = await liveTwoPaymentsJiroApproved(run, browser);
    await run.do('deny Saburo: both answers go in one message, and both end right, in the one turn', async () => {
      await deny(saburo, 'too much');
      await expectCard(page, jiro, 'done', 'Jiro');
      await expectCard(page, saburo, 'refused', 'Saburo');
      await expectReply(page, 'Paid 10 USD to Jiro; the balance is 990 USD.');
      await expectReply(page, 'too much');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message', 'answer:approval-responded approval-responded'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-remember'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const first = await payAndAsk(run, page);
    await run.do('remember for this chat: the server alone decides, the turn goes on', async () => {
      await first.getByTestId('remember').check();
      await first.getByTestId('approve').click();
      await expectCard(page, first, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message'], turns: 1 });
    });
    const second = cardOf(page, 'process_payment', 1);
    await run.do('the grant lets the same payment run without asking', async () => {
      await say(page, 'pay 50 USD to Hanako');
      await expectCard(page, second, 'done', 'second payment');
      await expectReply(page, 'Paid 50 USD to Hanako; the balance is 900 USD.');
      if ((await statesOf(page, second)).includes('asking')) throw new Error('the granted payment asked again');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message', 'message'], turns: 2 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'granted');
  },

  async 'live-inbox'(run, browser) {
    const context = await newContext(browser);
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = await payAndAsk(run, page);
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id);
    await run.do('approve from the inbox: the open turn goes on, the page sends nothing', async () => {
      await row.getByTestId('approve').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-location-inbox'(run, browser) {
    const context = await newContext(browser, {
      permissions: ['geolocation'],
      geolocation: { latitude: 35.6762, longitude: 139.6503 },
    });
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = cardOf(page, 'get_location');
    await run.do('ask: where am I', async () => {
      await say(page, 'where am I');
      await expectCard(page, card, 'asking', 'location');
    });
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id);
    await run.do('approve from the inbox: the turn hands the call over, the page runs it and answers', async () => {
      await row.getByTestId('approve').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      await expectCard(page, card, 'done', 'location');
      await expectReply(page, 'You are at 35.6762, 139.6503.');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      if (!sockets.received.includes('data-browser-call')) throw new Error('the server never handed the call over');
      expectFrames(sockets, { sent: ['message', 'answer:output-available'], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-two-mixed'(run, browser) {
    const { context, page, id, posts, sockets, jiro, saburo } = await liveTwoPaymentsJiroApproved(run, browser);
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id).filter({ hasText: 'Saburo' });
    await run.do('deny Saburo in the inbox: the page sends its approval of Jiro, and both end right', async () => {
      await row.getByTestId('reason').fill('too much');
      await row.getByTestId('deny').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      await expectCard(page, saburo, 'refused', 'Saburo');
      await expectCard(page, jiro, 'done', 'Jiro');
      await expectReply(page, 'Paid 10 USD to Jiro; the balance is 990 USD.');
      await expectReply(page, 'too much');
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      // One answer: Jiro's approval, with Saburo's denial as the inbox decided it unless the server had already
      // sent Saburo's result (a framework that streams the step's results together sends it only after Jiro's).
      const [first, answer, ...more] = sockets.sent.filter((frame) => frame.type !== 'ping');
      if (first?.kind !== 'message' || !answer || more.length > 0) {
        throw new Error(`the page sent ${sentKinds(sockets).join(', ')}`);
      }
      const part = (who) => answer.messages.at(-1).parts.find((p) => p.input?.recipient === who);
      const [jiroPart, saburoPart] = [part('Jiro'), part('Saburo')];
      if (jiroPart?.state !== 'approval-responded' || jiroPart.approval.approved !== true) {
        throw new Error(`the answer's Jiro part is ${JSON.stringify(jiroPart)}`);
      }
      const echoed = saburoPart?.state === 'approval-responded' && saburoPart.approval.approved === false;
      if (!echoed && answer.kind !== 'answer:approval-responded') {
        throw new Error(`the answer's Saburo part is ${JSON.stringify(saburoPart)} (${answer.kind})`);
      }
      expectFrames(sockets, { sent: ['message', answer.kind], turns: 1 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'live-dropped'(run, browser) {
    const context = await newContext(browser);
    // keeps the page's sockets reachable, so the scenario can drop one
    await context.addInitScript(() => {
      window.__sockets = [];
      window.WebSocket = class extends window.WebSocket {
        constructor(...args) {
          super(...args);
          window.__sockets.push(this);
        }
      };
    });
    const { page, id, posts, sockets, me } = await openChat(run, context, { transport: 'live' });
    Object.assign(run.report, { chat: id, me: me.id });
    const card = await payAndAsk(run, page);
    await run.do('the socket drops while the card asks: the page opens a new one and resumes, the card asks', async () => {
      await page.evaluate(() => window.__sockets.at(-1).close());
      const deadline = Date.now() + WAIT_MS;
      while (!(sockets.opened === 2 && sentKinds(sockets).includes('resume'))) {
        if (Date.now() > deadline) throw new Error(`the page sent ${sentKinds(sockets).join(', ')} on its own`);
        await new Promise((wake) => setTimeout(wake, 50));
      }
      await expectCard(page, card, 'asking', 'payment');
      await expectText(page, page.getByTestId('status'), 'Waiting for your approval.', 'the status line');
    });
    await run.shot(page, 'dropped');
    await run.do('approve: the answer goes on the new socket, which follows the turn to its end', async () => {
      await card.getByTestId('approve').click();
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, PAID_HANAKO);
      await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      expectFrames(sockets, { sent: ['message', 'resume', 'answer:approval-responded'], turns: 1, opened: 2 });
      count(posts, 0, 'live');
    });
    await run.shot(page, 'done');
  },

  async 'inbox-edit-grants'(run, browser) {
    const context = await newContext(browser);
    const { page, id } = await openChat(run, context);
    const first = await payAndAsk(run, page);
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id);
    await run.do('edit the arguments: bad JSON is caught before sending', async () => {
      await row.getByTestId('edit-args').click();
      await row.getByTestId('args-editor').fill('{"amount": 5,');
      await expectText(inbox, row.getByTestId('args-error'), 'JSON', 'the parse error');
      if (await row.getByTestId('approve').isEnabled()) throw new Error('Approve is enabled with invalid arguments');
      await row.getByTestId('args-editor').fill('[5]');
      await expectText(inbox, row.getByTestId('args-error'), 'must be a JSON object', 'the shape error');
      await row.getByTestId('args-editor').fill(JSON.stringify({ amount: 5, currency: 'USD', recipient: 'Hanako' }));
    });
    await run.shot(inbox, 'editing');
    await run.do('approve the edited call: the new call and digest show, 5 USD is paid', async () => {
      await row.getByTestId('approve').click();
      // an edit is a new call the policy asks about again: the approval now says what it asks
      const recent = inbox.getByTestId('recent-row').filter({ hasText: 'Pay 5 USD to Hanako' });
      await expectText(inbox, recent.getByTestId('edited-args'), '"amount":5', 'the edited call');
      const digest = await recent.getByTestId('edited-digest').first().textContent({ timeout: WAIT_MS });
      if (!/^[0-9a-f]{64}$/.test(digest ?? '')) throw new Error(`the edited digest is ${JSON.stringify(digest)}`);
      await expectCard(page, first, 'done', 'edited payment');
      await expectReply(page, 'Paid 5 USD to Hanako; the balance is 995 USD.');
    });
    await run.shot(inbox, 'edited');
    await run.shot(page, 'edited-paid');
    const second = cardOf(page, 'process_payment', 1);
    await run.do('remember for this chat: approve with the box ticked', async () => {
      await say(page, 'pay 50 USD to Hanako');
      await expectCard(page, second, 'asking', 'second payment');
      await second.getByTestId('remember').check();
      await second.getByTestId('approve').click();
      await expectCard(page, second, 'done', 'second payment');
      await expectReply(page, 'Paid 50 USD to Hanako; the balance is 945 USD.');
    });
    const grant = inbox.locator('[data-testid="grant-row"]').filter({ hasText: id });
    await run.do('the inbox lists the session grant', async () => {
      await grant.waitFor({ timeout: WAIT_MS });
      await expectText(inbox, grant, 'process_payment', 'the grant');
    });
    await run.shot(inbox, 'grant');
    const third = cardOf(page, 'process_payment', 2);
    await run.do('the grant lets the same payment run without asking', async () => {
      await say(page, 'pay 50 USD to Hanako');
      await expectCard(page, third, 'done', 'third payment');
      await expectReply(page, 'Paid 50 USD to Hanako; the balance is 895 USD.');
      if ((await statesOf(page, third)).includes('asking')) throw new Error('the granted payment asked again');
    });
    await run.do('revoke the grant: it leaves the list and the next payment asks again', async () => {
      await grant.getByTestId('revoke').click();
      await grant.waitFor({ state: 'detached', timeout: WAIT_MS });
      await say(page, 'pay 50 USD to Hanako');
      await expectCard(page, cardOf(page, 'process_payment', 3), 'asking', 'fourth payment');
    });
    await run.shot(inbox, 'revoked');
    await run.shot(page, 'asks-again');
  },

  // Four eyes: the demo asks two of finance for a payment over 500, and never the person who asked.
  async quorum(run, browser) {
    const { alice, bob } = PRINCIPALS;
    if (!alice || !bob) throw new Error('SIGNOFF_PRINCIPALS must name the tokens of alice and bob (role finance)');
    const context = await newContext(browser);
    const { page, id } = await openChat(run, context);
    run.report.chat = id;
    const card = cardOf(page, 'process_payment');
    await run.do('ask: pay 600 USD to Hanako: the card waits for finance, with nothing to click', async () => {
      await say(page, 'pay 600 USD to Hanako');
      await expectCard(page, card, 'waiting', 'payment');
      await expectHeadline(card, 'Pay 600 USD to Hanako');
      await expectText(page, card.getByTestId('waiting'), 'waiting for finance, 0 of 2', 'the card');
      await card.getByTestId('deadline').waitFor();
      if ((await card.getByTestId('approve').count()) > 0) throw new Error('the requester is offered Approve');
      await expectText(page, page.getByTestId('status'), 'Waiting for finance to approve.', 'the status line');
    });
    await run.shot(page, 'waiting');
    let approval;
    await run.do("the page's own approval is refused: the requester may not approve", async () => {
      const found = await api(alice, 'GET', `/api/approvals?state=pending&chat=${encodeURIComponent(id)}`);
      [approval] = found.body?.approvals ?? [];
      if (!approval?.may_decide) throw new Error(`alice may not decide: ${JSON.stringify(found)}`);
      run.allow(/403|Forbidden/, 2); // the answer, and Chromium's "Failed to load resource" line about it
      const status = await page.evaluate(async (url) => {
        const init = { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"approved":true}' };
        return (await fetch(url, init)).status;
      }, `/api/chat/${encodeURIComponent(id)}/approvals/${encodeURIComponent(approval.id)}`);
      if (status !== 403) throw new Error(`the requester's approval got ${status}, not 403`);
    });
    await run.do('alice approves over REST: the card shows her vote live, and still waits', async () => {
      const decided = await api(alice, 'POST', `/api/approvals/${approval.id}/decision`, { approved: true });
      const { status, body } = decided;
      if (status !== 200 || body.state !== 'pending' || body.tally !== '1 of 2: alice' || body.may_decide) {
        throw new Error(`alice's approval answered ${JSON.stringify(decided)}`);
      }
      await expectText(page, card.getByTestId('tally'), '1 of 2: alice', 'the card');
      await expectText(page, card.getByTestId('waiting'), 'waiting for finance, 1 of 2: alice', 'the card');
      await expectCard(page, card, 'waiting', 'payment');
    });
    await run.shot(page, 'one-vote');
    await run.do('alice approving again is a 409 that names the approval', async () => {
      const again = await api(alice, 'POST', `/api/approvals/${approval.id}/decision`, { approved: true });
      if (again.status !== 409 || again.body?.approval?.state !== 'pending') {
        throw new Error(`alice's second approval answered ${JSON.stringify(again)}`);
      }
    });
    const aliceInbox = await openInbox(run, context, 'inbox (alice)', alice);
    await run.do("alice's inbox lists it as hers voted on, with nothing to click", async () => {
      await expectText(aliceInbox, aliceInbox.getByTestId('whoami'), 'Signed in as alice (finance)', 'the header');
      const row = inboxRow(aliceInbox, id);
      await expectText(aliceInbox, row.getByTestId('quorum'), '1 of 2: you — waiting for finance', 'the row');
      if ((await row.getByTestId('approve').count()) > 0) throw new Error('alice is offered Approve again');
    });
    await run.shot(aliceInbox, 'inbox-alice');
    const inbox = await openInbox(run, context, 'inbox (bob)', bob);
    const row = inboxRow(inbox, id);
    await run.do('bob signs in: the row shows the tally so far', async () => {
      await expectText(inbox, inbox.getByTestId('whoami'), 'Signed in as bob (finance)', 'the header');
      await expectText(inbox, row.getByTestId('description'), 'Pay 600 USD to Hanako', 'the row');
      await expectText(inbox, row.getByTestId('tally'), '1 of 2: alice', 'the row');
      if ((await row.getByTestId('remember').count()) > 0) throw new Error('one vote of two offers Remember');
    });
    await run.shot(inbox, 'inbox-bob');
    await run.do('bob approves: the quorum is met, the chat pays', async () => {
      await row.getByTestId('approve').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      const recent = inbox.getByTestId('recent-row').filter({ hasText: 'Pay 600 USD to Hanako' });
      await expectText(inbox, recent.getByTestId('decided-by'), 'bob', 'the recent decision');
      await expectCard(page, card, 'done', 'payment');
      await expectText(page, card.getByTestId('card-note'), 'approved by alice (finance) and bob (finance)', 'the card');
      await expectReply(page, 'Paid 600 USD to Hanako; the balance is 400 USD.');
    });
    await run.shot(page, 'paid');
    await run.shot(inbox, 'inbox-decided');
  },

  // What whoever asks writes is shown as it is: no hidden reversal, no look-alike letters unmarked.
  async 'hidden-text'(run, browser) {
    const context = await newContext(browser);
    const { page, id } = await openChat(run, context);
    const [reversed, lookalike] = [cardOf(page, 'process_payment', 0), cardOf(page, 'process_payment', 1)];
    await run.do('a right-to-left override and a Cyrillic letter are shown, in the cards', async () => {
      await say(page, 'pay 50 USD to \u202eokanaH and 20 USD to M\u0430llory');
      await expectCard(page, reversed, 'asking', 'reversed');
      await expectCard(page, lookalike, 'asking', 'look-alike');
      // the description may quote such a value (as JSON): that hides nothing, the override is what must show
      const headline = await reversed.getByTestId('headline').textContent();
      if (!/^Pay 50 USD to "?\u27e8U\+202E\u27e9okanaH"?$/.test(headline ?? '')) {
        throw new Error(`the card headline is ${JSON.stringify(headline)}`);
      }
      await expectText(page, reversed.getByTestId('args'), '\u27e8U+202E\u27e9okanaH', 'the card arguments');
      if ((await reversed.textContent()).includes('\u202e')) throw new Error('the card shows a raw override');
      await expectHeadline(lookalike, 'Pay 20 USD to \u26a0M\u0430llory');
    });
    await run.shot(page, 'chat');
    const inbox = await openInbox(run, context);
    await run.do('and in the inbox rows', async () => {
      const rows = inboxRow(inbox, id);
      await expectText(inbox, rows.getByTestId('description'), '\u27e8U+202E\u27e9okanaH', 'the row');
      await expectText(inbox, rows.getByTestId('description'), 'Pay 20 USD to \u26a0M\u0430llory', 'the row');
      const shown = (await rows.allTextContents()).join(' ');
      if (shown.includes('\u202e')) throw new Error(`the inbox shows a raw override: ${JSON.stringify(shown)}`);
    });
    await run.shot(inbox, 'inbox');
  },

  // A 5,000-character recipient whose end is what matters ("…Mallory"): both pages wrap it, so its end shows
  // beside the buttons and neither page scrolls sideways.
  async 'inbox-long-value'(run, browser) {
    const recipient = `Hanako${'x'.repeat(4987)}Mallory`;
    const context = await newContext(browser);
    const { page, id } = await openChat(run, context, { wait: 'blocking' });
    const card = cardOf(page, 'process_payment');
    await run.do('ask: pay 50 USD to a 5,000-character recipient', async () => {
      await say(page, `pay 50 USD to ${recipient}`);
      await expectCard(page, card, 'asking', 'payment');
      await expectHeadline(card, `Pay 50 USD to ${recipient}`);
    });
    await run.do('the chat card wraps it: its end shows, beside the buttons', async () => {
      await expectEndShown(card.getByTestId('headline'), 'Mallory', 'the card headline');
      await expectEndShown(card.getByTestId('args'), 'Mallory', 'the card arguments');
      await expectButtonShown(page, card.getByTestId('approve'), "the card's Approve");
      await expectButtonShown(page, card.getByTestId('deny'), "the card's Deny");
      await expectNoSidewaysScroll(page, 'the chat page');
    });
    await run.shot(page, 'chat-pending');
    const inbox = await openInbox(run, context);
    const row = inboxRow(inbox, id);
    await run.do('the inbox row wraps it: its end shows, beside the buttons', async () => {
      await row.waitFor({ timeout: WAIT_MS });
      await expectText(inbox, row.getByTestId('description'), `Pay 50 USD to ${recipient}`, 'the inbox row');
      await expectEndShown(row.getByTestId('description'), 'Mallory', 'the inbox headline');
      await expectEndShown(row.getByTestId('args'), 'Mallory', 'the inbox arguments');
      await expectButtonShown(inbox, row.getByTestId('approve'), "the row's Approve");
      await expectButtonShown(inbox, row.getByTestId('deny'), "the row's Deny");
      await expectNoSidewaysScroll(inbox, 'the inbox');
    });
    await run.shot(inbox, 'inbox-pending');
    await run.do('approve from the inbox: the recent row and the reply wrap it too', async () => {
      await row.getByTestId('approve').click();
      await row.waitFor({ state: 'detached', timeout: WAIT_MS });
      const recent = inbox.getByTestId('recent-row').filter({ hasText: 'Mallory' });
      await expectText(inbox, recent.getByTestId('decided-by'), 'admin', 'the recent decision');
      await expectEndShown(recent, 'Mallory', 'the recent decision');
      await expectNoSidewaysScroll(inbox, 'the inbox');
      await expectCard(page, card, 'done', 'payment');
      await expectReply(page, `Paid 50 USD to ${recipient}`);
      await expectEndShown(replies(page).last(), 'Mallory', 'the reply');
      await expectNoSidewaysScroll(page, 'the chat page');
    });
    await run.shot(inbox, 'inbox-decided');
    await run.shot(page, 'chat-done');
  },

  // A link to one approval (`/approvals#<id>`, the MCP gateway's link for a client that can only open a URL)
  // lands on its row: marked as the current one and scrolled into view, in an inbox too short to show it
  // otherwise; a new link moves the mark.
  async 'inbox-linked'(run, browser) {
    const ids = [];
    for (const label of ['first chat', 'second chat']) {
      const { page, id } = await openChat(run, await newContext(browser), { label });
      await payAndAsk(run, page);
      const found = await api(TOKEN, 'GET', `/api/approvals?state=pending&chat=${encodeURIComponent(id)}`);
      const [approval] = found.body?.approvals ?? [];
      if (!approval) throw new Error(`no pending approval in ${id}: ${JSON.stringify(found)}`);
      ids.push(approval.id);
    }
    const [first, second] = ids;
    const inbox = await (await newContext(browser, { viewport: { width: 1100, height: 480 } })).newPage();
    run.watch(inbox, 'inbox');
    await run.do('open the link to the second payment and sign in: its row alone is marked, in view', async () => {
      await inbox.goto(`${BASE}/approvals#${encodeURIComponent(second)}`);
      await inbox.getByTestId('token-input').fill(TOKEN);
      await inbox.getByTestId('token-submit').click();
      await expectLinked(inbox, second, 'the linked row');
      const marked = await inbox.locator('[aria-current="true"]').count();
      if (marked !== 1) throw new Error(`${marked} rows are marked as the linked one`);
    });
    await run.shot(inbox, 'inbox-linked');
    await run.do('a link to the first payment moves the mark', async () => {
      await inbox.evaluate((id) => {
        window.location.hash = id;
      }, first);
      await expectLinked(inbox, first, 'the newly linked row');
      const earlier = inbox.locator(`[data-approval-id="${second}"]`);
      if ((await earlier.getAttribute('aria-current')) !== null) throw new Error('the earlier row is still marked');
    });
  },

  // A chat belongs to whoever started it: another browser is told so, and sees nothing of it.
  async 'not-yours'(run, browser) {
    const { page, id } = await openChat(run, await newContext(browser));
    await run.do('start a chat', async () => {
      await say(page, 'weather in Tokyo');
      await expectReply(page, 'Tokyo');
    });
    const stranger = await (await newContext(browser)).newPage();
    run.watch(stranger, 'another browser');
    await run.do("another browser opens it: it is someone else's", async () => {
      run.allow(/404|Not Found/, 2); // the answer, and Chromium's "Failed to load resource" line about it
      await stranger.goto(`${BASE}/?chat=${encodeURIComponent(id)}`);
      await expectText(stranger, stranger.getByTestId('load-problem'), 'belongs to someone else', 'the page');
      if ((await stranger.getByTestId('message').count()) > 0) throw new Error('the stranger sees the messages');
    });
    await run.shot(stranger, 'not-yours');
  },
};

// -- main ----------------------------------------------------------------------------------------------------------

async function main() {
  const scenario = process.argv[2];
  if (!SCENARIOS[scenario]) {
    throw new Failure(`usage: node tests/js/page.mjs <scenario>; scenarios: ${Object.keys(SCENARIOS).join(', ')}`);
  }
  if (!BASE || !TOKEN) throw new Failure('SIGNOFF_BASE and SIGNOFF_TOKEN must be set');
  mkdirSync(ARTIFACTS, { recursive: true });
  const run = new Run(scenario);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    await SCENARIOS[scenario](run, browser);
    run.check();
    console.error(`[${scenario}] passed`);
    console.log(JSON.stringify(run.report));
  } finally {
    run.closing = true;
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error instanceof Failure ? `FAILED: ${error.message}` : error);
  process.exit(1);
});
