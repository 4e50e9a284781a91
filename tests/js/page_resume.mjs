// The chat page's reply cut by its worker's end (issue 43, item 7), in the system Chromium through playwright-core.
// The page talks to SIGNOFF_BASE: a proxy that reaches worker A, or worker B once A is gone; or B itself.
// SIGNOFF_CASE says which page:
// - "blocking": a blocking SSE page. A card asks; this script kills A (SIGNOFF_SIGNAL, pid SIGNOFF_KILL_PID),
//   decides the approval through the REST API (which reaches B), and waits for the page to show the decision
//   and the payment's result without a reload.
// - "live": the same on a live page (?transport=live), whose socket closes with A: the page opens a new one by
//   itself (through the proxy, on B) and sends `resume` there; this script checks it did. The approval is
//   decided once that socket closed: a worker told to stop still serves until it notices.
// - "fresh": the chat SIGNOFF_CHAT, whose blocking reply was cut by A's death and whose approval was decided
//   meanwhile, opened in a fresh page with the session of its owner (SIGNOFF_COOKIE): it follows the chat by
//   itself, to the result.
//
// Usage: SIGNOFF_BASE=... SIGNOFF_TOKEN=... SIGNOFF_CASE=... [SIGNOFF_KILL_PID=... SIGNOFF_SIGNAL=SIGKILL]
//        [SIGNOFF_CHAT=... SIGNOFF_COOKIE=...] node tests/js/page_resume.mjs
// Prints {"chat": id, "reply": text, "note": card note, "sockets": opened, "resumes": sent} on stdout; exits 1
// naming the step that failed, or on an uncaught page error or a console error other than the cut stream's.

import { chromium } from 'playwright-core';

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const TOKEN = process.env.SIGNOFF_TOKEN ?? '';
const CASE = process.env.SIGNOFF_CASE ?? 'blocking';
const KILL_PID = Number(process.env.SIGNOFF_KILL_PID);
const SIGNAL = process.env.SIGNOFF_SIGNAL ?? 'SIGKILL';
const WAIT_MS = 90_000; // generous: the page waits for the dead worker's heartbeats to go stale, under load
const CUT = /network|ERR_|Failed to fetch|terminated|fetch failed|stopping|WebSocket/i;

async function step(name, action) {
  console.error(`[page-resume] ${name}`);
  try {
    return await action();
  } catch (error) {
    throw new Error(`step "${name}" failed: ${String(error.message).split('\n')[0]}`);
  }
}

async function api(path, init = {}) {
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  return fetch(`${BASE}${path}`, { ...init, headers }).catch(() => undefined);
}

/** Until `check` holds, asking again while a worker is gone or the answer isn't there yet. */
async function until(check) {
  for (;;) {
    const found = await check();
    if (found) return found;
    await new Promise((wake) => setTimeout(wake, 100));
  }
}

async function main() {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
  const problems = [];
  try {
    const context = await browser.newContext();
    if (process.env.SIGNOFF_COOKIE) {
      // the session of the client that started the chat: the chat is its owner's alone
      await context.addCookies([{ name: 'signoff_session', value: process.env.SIGNOFF_COOKIE, url: BASE }]);
    }
    const page = await context.newPage();
    page.on('pageerror', (error) => problems.push(`uncaught ${error.name}: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !CUT.test(message.text())) problems.push(`console: ${message.text()}`);
    });
    const sockets = { opened: 0, resumes: 0 };
    const pageSockets = [];
    page.on('websocket', (socket) => {
      sockets.opened += 1;
      pageSockets.push(socket);
      socket.on('framesent', ({ payload }) => {
        if (String(payload).includes('"type":"resume"')) sockets.resumes += 1;
      });
    });
    const card = page.locator('[data-testid="tool-card"][data-tool="process_payment"]').first();
    const state = (wanted) => card.and(page.locator(`[data-state="${wanted}"]`)).waitFor({ timeout: WAIT_MS });
    const chat = process.env.SIGNOFF_CHAT ?? `page-resume-${Math.random().toString(36).slice(2, 10)}`;

    if (CASE !== 'fresh') {
      const transport = CASE === 'live' ? 'transport=live' : 'wait=blocking';
      await step(`open the chat (${transport})`, async () => {
        await page.goto(`${BASE}/?chat=${chat}&${transport}`);
        await page.getByTestId('status').waitFor({ timeout: WAIT_MS });
      });
      await step('a payment asks', async () => {
        await page.getByTestId('chat-input').fill('pay 8 USD to Page');
        await page.getByTestId('send').click();
        await state('asking');
      });
      const approval = await step('the approval is pending', () =>
        until(async () => {
          const listed = await api('/api/approvals?state=pending');
          return listed?.ok && (await listed.json()).approvals.find((a) => a.chat_id === chat);
        }),
      );
      const live = pageSockets.filter((socket) => !socket.isClosed());
      await step(`worker A gets ${SIGNAL}`, () => process.kill(KILL_PID, SIGNAL));
      // A signalled worker serves on until it notices (uvicorn looks every 0.1 s, later under load): a decision
      // sent meanwhile would reach A, which runs the call itself, or is stopped while it runs. The page's socket
      // closes once A stopped listening, so from then on the decision reaches B.
      await step("worker A closes the page's socket", () =>
        until(async () => live.every((socket) => socket.isClosed())),
      );
      await step('the approval is decided on worker B', () =>
        until(async () => {
          const decided = await api(`/api/approvals/${approval.id}/decision`, {
            method: 'POST',
            body: JSON.stringify({ approved: true }),
          });
          return decided?.status === 200;
        }),
      );
    } else {
      await step('open the cut chat in a fresh page', () => page.goto(`${BASE}/?chat=${chat}&wait=blocking`));
    }
    await step('the page shows the decision and the result', async () => {
      try {
        await state('done');
        await card.getByTestId('card-note').filter({ hasText: /approved by (?!you)/ }).waitFor({ timeout: WAIT_MS });
        await page.getByTestId('status').filter({ hasText: 'Ready.' }).waitFor({ timeout: WAIT_MS });
      } catch (error) {
        const seen = async (locator, read) => (await locator.count()) > 0 ? read(locator.first()) : 'none';
        const shown = {
          card: await seen(card, (found) => found.getAttribute('data-state')),
          note: await seen(card.getByTestId('card-note'), (found) => found.textContent()),
          status: await seen(page.getByTestId('status'), (found) => found.textContent()),
          main: await seen(page.locator('main'), (found) => found.textContent()),
        };
        throw new Error(`${String(error.message).split('\n')[0]}; the page shows ${JSON.stringify(shown)}`);
      }
    });
    const reply = await page.locator('[data-testid="message"][data-role="assistant"]').last().textContent();
    const note = await card.getByTestId('card-note').textContent();
    if (problems.length > 0) throw new Error(`the page misbehaved:\n  ${problems.join('\n  ')}`);
    console.log(JSON.stringify({ chat, reply, note, ...sockets }));
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(`FAILED: ${error.message}`);
  process.exit(1);
});
