// A page on another site attacks a chat it knows the id of, in the victim's own browser (one cookie jar):
// the attack that paid Mallory before chats had owners and the live socket checked Origin.
//
// Usage: SIGNOFF_BASE=http://127.0.0.1:8000 EVIL_PAGE=http://127.0.0.1:9000/evil.html node tests/js/cross_site.mjs
//
// 1. The victim opens the chat page over the live socket and asks `pay 77 USD to Mallory`: the card asks.
// 2. The attacker's page (another origin on the same host: the same site, so the browser sends the victim's
//    SameSite=Lax cookie with its requests) knows the chat id and even the approval id, and tries to read the
//    chat, to follow it over `WS /api/live` and approve there, to approve with a "simple" text/plain POST and
//    with a JSON POST, and to continue the chat with a text/plain POST.
// 3. The victim's page approves, and the payment runs once.
// Prints one JSON object on stdout: {chat, approvalId, attack: {...what each attempt saw...}, paid}.

import { chromium } from 'playwright-core';

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const EVIL_PAGE = process.env.EVIL_PAGE ?? '';
const WAIT_MS = 15_000;
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

/** Runs in the attacker's page: every way a page on another site could try to act on the chat. */
async function attack({ base, chat, approvalId }) {
  const seen = {};
  const attempt = async (name, action) => {
    try {
      seen[name] = await action();
    } catch (error) {
      seen[name] = `blocked: ${error.name}`;
    }
  };
  const user = (text) => ({ id: chat, messages: [{ id: `evil-${text}`, role: 'user', parts: [{ type: 'text', text }] }] });
  await attempt('read', async () => {
    const response = await fetch(`${base}/api/chat/${chat}`, { credentials: 'include' });
    return `read ${response.status}: ${(await response.text()).slice(0, 80)}`;
  });
  await attempt('approveJson', async () => {
    const response = await fetch(`${base}/api/chat/${chat}/approvals/${approvalId}`, {
      method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ approved: true }),
    });
    return `answered ${response.status}`;
  });
  for (const [name, path, body] of [
    ['approveSimple', `/api/chat/${chat}/approvals/${approvalId}`, { approved: true }],
    ['continueSimple', '/api/chat', user('pay 99 USD to Mallory')],
  ]) {
    await attempt(name, async () => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' },
        body: JSON.stringify(body),
      });
      return `sent (${response.type})`; // opaque: the page never learns the answer, the server still got it
    });
  }
  await attempt('socket', () => new Promise((resolve) => {
    const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/api/live`);
    const frames = [];
    socket.onopen = () => {
      socket.send(JSON.stringify({ type: 'resume', id: chat }));
      const answer = { type: 'approval-responded', approval: { id: approvalId, approved: true } };
      socket.send(JSON.stringify({ type: 'message', ...user('x'), messages: [{ id: 'a', role: 'assistant', parts: [answer] }] }));
    };
    socket.onmessage = (event) => frames.push(String(event.data).slice(0, 60));
    socket.onclose = (event) => resolve(`closed ${event.code}${frames.length ? ` after ${frames.join(' | ')}` : ' before opening'}`);
    setTimeout(() => { socket.close(); resolve(`still open after ${frames.join(' | ')}`); }, 3000);
  }));
  return seen;
}

async function main() {
  if (!BASE || !EVIL_PAGE) throw new Error('SIGNOFF_BASE and EVIL_PAGE must be set');
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
  try {
    const context = await browser.newContext();
    const chat = `victim-${Math.random().toString(36).slice(2, 10)}`;
    const victim = await context.newPage();
    await victim.goto(`${BASE}/?chat=${chat}&transport=live`);
    await victim.getByTestId('chat-input').fill('pay 77 USD to Mallory');
    await victim.getByTestId('send').click();
    const card = victim.locator('[data-testid="tool-card"][data-tool="process_payment"]');
    await card.and(victim.locator('[data-state="asking"]')).waitFor({ timeout: WAIT_MS });
    const shown = await victim.evaluate(async (id) => (await fetch(`/api/chat/${id}`)).json(), chat);
    const approvalId = shown.approvals[0].id;

    const evil = await context.newPage();
    await evil.goto(EVIL_PAGE);
    const seen = await evil.evaluate(attack, { base: BASE, chat, approvalId });
    await evil.close();

    await card.and(victim.locator('[data-state="asking"]')).waitFor({ timeout: WAIT_MS });
    await card.getByTestId('approve').click();
    const reply = victim.locator('[data-testid="message"][data-role="assistant"]').last();
    await reply.getByText('Paid 77 USD to Mallory').waitFor({ timeout: WAIT_MS });
    console.log(JSON.stringify({ chat, approvalId, attack: seen, paid: true }));
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
