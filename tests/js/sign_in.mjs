// Signing in on the chat page of a server that takes no credential-less chats, in the system Chromium: with a
// personal token, and at the OIDC issuer (the authorization code flow with PKCE, through the issuer's own
// login form). Each ends with the page talking as the signed-in principal, and a screenshot of each state.
//
// Usage: SIGNOFF_BASE=http://127.0.0.1:PORT SIGNOFF_PRINCIPALS='{"alice": "sop_..."}' \
//        SIGNOFF_ARTIFACTS=artifacts/screenshots node tests/js/sign_in.mjs <token|oidc>
//
// Prints one JSON object on success ({"me": "<name>"}); exits 1 naming the step that failed, and on any
// console error or failed request of signoff's pages the step did not expect (the issuer's own page is not
// signoff's, and its stylesheet, from a CDN, can't load here).

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const PRINCIPALS = JSON.parse(process.env.SIGNOFF_PRINCIPALS || '{}');
const ARTIFACTS = process.env.SIGNOFF_ARTIFACTS ?? 'artifacts/screenshots';
const WAIT_MS = 15_000;
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

const scenario = process.argv[2];
mkdirSync(ARTIFACTS, { recursive: true });
const problems = [];
let shots = 0;

function step(name) {
  console.error(`[sign-in ${scenario}] ${name}`);
}

async function shot(page, state) {
  shots += 1;
  await page.screenshot({ path: join(ARTIFACTS, `sign-in-${scenario}-${shots}-${state}.png`), fullPage: true });
}

function watch(page) {
  const ours = (url) => url.startsWith(BASE);
  page.on('console', (m) => {
    if ((m.type() === 'error' || m.type() === 'warning') && ours(m.location()?.url ?? BASE)) {
      // the first load is refused (401) until the page signs in: that is the point
      if (!/401/.test(m.text())) problems.push(`console ${m.type()}: ${m.text()}`);
    }
  });
  page.on('pageerror', (e) => problems.push(`uncaught ${e.name}: ${e.message}`));
  page.on('requestfailed', (r) => {
    if (ours(r.url()) && r.failure()?.errorText !== 'net::ERR_ABORTED') problems.push(`failed: ${r.url()}`);
  });
}

async function signedInAs(page, name) {
  await page.getByTestId('status').waitFor({ timeout: WAIT_MS });
  const me = (await page.getByTestId('me').textContent()).trim();
  if (me !== name) throw new Error(`the page talks as ${me}, not ${name}`);
  const placeholder = await page.getByTestId('chat-input').getAttribute('placeholder');
  if (/Hanako/.test(placeholder)) throw new Error(`the message box suggests the demo's words: ${placeholder}`);
}

const SCENARIOS = {
  async token(page) {
    step('the chat asks to sign in, and offers a token');
    await page.goto(`${BASE}/?chat=sign-in-token`);
    await page.getByTestId('sign-in').waitFor({ timeout: WAIT_MS });
    await shot(page, 'asked');
    step('a wrong token is refused in words');
    await page.getByTestId('token-input').fill('sop_not-a-token');
    await page.getByTestId('token-submit').click();
    await page.getByText('wrong token').waitFor({ timeout: WAIT_MS });
    step('the personal token signs in, and the chat opens as its principal');
    await page.getByTestId('token-input').fill(PRINCIPALS.alice);
    await page.getByTestId('token-submit').click();
    await signedInAs(page, 'alice');
    await shot(page, 'signed-in');
    return { me: 'alice' };
  },

  async oidc(page) {
    step("the chat offers the issuer's login");
    await page.goto(`${BASE}/?chat=sign-in-oidc`);
    const login = page.getByTestId('oidc-login');
    await login.waitFor({ timeout: WAIT_MS });
    await shot(page, 'asked');
    step("the issuer's login form names its subject");
    await login.click();
    await page.locator('input[name="sub"]').waitFor({ timeout: WAIT_MS });
    await page.locator('input[name="sub"]').fill('alice');
    await shot(page, 'issuer');
    step('authorized, the browser comes back to the same chat, signed in');
    await page.getByRole('button', { name: 'Authorize' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${BASE}/?chat=sign-in-oidc`), { timeout: WAIT_MS });
    await signedInAs(page, 'Alice Liddell');
    await shot(page, 'signed-in');
    return { me: 'Alice Liddell' };
  },
};

const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ARGS });
try {
  const page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
  watch(page);
  const report = await SCENARIOS[scenario](page);
  if (problems.length > 0) throw new Error(`the page misbehaved:\n  ${problems.join('\n  ')}`);
  console.log(JSON.stringify(report));
} catch (error) {
  console.error(`[sign-in ${scenario}] FAILED: ${error.message}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
