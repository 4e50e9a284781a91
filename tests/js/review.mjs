// The pages an approver opens from a phone, in the system Chromium through playwright-core, against a running
// `signoff demo --mailbox` whose finance approvers were mailed a review link each: the mailbox, the email review
// page and the inbox, at a phone's width (390 × 844) and a laptop's (1280 × 800).
//
// Usage: SIGNOFF_BASE=http://127.0.0.1:8000 SIGNOFF_TOKEN=<admin token> SIGNOFF_LINKS='["<link>", "<link>"]' \
//        SIGNOFF_ARTIFACTS=artifacts/screenshots node tests/js/review.mjs <scenario>
//
// - `look`: every page at both widths never scrolls sideways, keeps its header on one line with no word broken
//   ("Cha/t"), and shows what it must: the mailbox both mails, the review page the inbox's card (the arguments
//   with the bidi override spelled out, the deadline counting down) and its form, the inbox its row. Nothing is
//   decided.
// - `decide`: the first link approves with JavaScript on, the second in a browser with JavaScript off, where the
//   page is the server's alone and its plain form still decides.
//
// Screenshots: $SIGNOFF_ARTIFACTS/review-<scenario>-<nn>-<state>.png. Exits 1 naming the step on an unmet
// expectation, and on any console error or warning (a CSP violation is one), uncaught page error, failed request
// or HTTP error answer. Prints `{}` on stdout when it passes; progress goes to stderr.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];
const WAIT_MS = 15_000;
const PHONE = { width: 390, height: 844 };
const LAPTOP = { width: 1280, height: 800 };

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const TOKEN = process.env.SIGNOFF_TOKEN ?? '';
const LINKS = JSON.parse(process.env.SIGNOFF_LINKS || '[]');
const ARTIFACTS = process.env.SIGNOFF_ARTIFACTS ?? 'artifacts/screenshots';

class Failure extends Error {}

class Run {
  constructor(scenario) {
    this.scenario = scenario;
    this.step = 'start';
    this.shots = 0;
    this.problems = [];
  }

  async do(step, action) {
    this.step = step;
    console.error(`[review-${this.scenario}] ${step}`);
    try {
      await action();
    } catch (error) {
      throw new Failure(`step "${step}" failed: ${error.message.split('\n')[0]}`);
    }
    if (this.problems.length > 0) {
      throw new Failure(`step "${step}": the page misbehaved:\n  ${this.problems.join('\n  ')}`);
    }
  }

  /** Fails the run on what `page` must not do; with `scriptsOff`, the browser's refusal to fetch the page's
   * scripts (which Chromium reports as "csp") is no fault. */
  watch(page, label, { scriptsOff = false } = {}) {
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') {
        this.problems.push(`${label}: console ${message.type()}: ${message.text()}`);
      }
    });
    page.on('pageerror', (error) => this.problems.push(`${label}: uncaught ${error.name}: ${error.message}`));
    page.on('requestfailed', (request) => {
      const reason = request.failure()?.errorText;
      if (scriptsOff && reason === 'csp' && /\/static\/assets\/[\w-]+\.js$/.test(request.url())) return;
      this.problems.push(`${label}: request failed: ${request.method()} ${request.url()}: ${reason}`);
    });
    page.on('response', (response) => {
      if (response.status() >= 400) this.problems.push(`${label}: HTTP ${response.status()} for ${response.url()}`);
    });
  }

  async shot(page, state) {
    this.shots += 1;
    const name = `review-${this.scenario}-${String(this.shots).padStart(2, '0')}-${state}.png`;
    await page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
  }
}

// -- what every page must do at every width ------------------------------------------------------------------------

/** Nothing on the page is wider than the viewport: it never scrolls sideways. */
async function expectNoSidewaysScroll(page, what) {
  const { wide, viewport } = await page.evaluate(() => ({
    wide: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  }));
  if (wide > viewport) throw new Error(`${what} is ${wide} pixels wide, wider than the viewport's ${viewport}`);
}

/** The header's title and each of its links, buttons and words sit on one line, and none is broken inside. */
async function expectOneLineHeader(page, what) {
  const seen = await page.evaluate(() => {
    const header = document.querySelector('header.top');
    const items = [header.querySelector('h1'), ...header.querySelector('nav').children];
    const boxes = items.map((item) => item.getBoundingClientRect());
    const lines = (item) => {
      const range = document.createRange();
      range.selectNodeContents(item);
      return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
    };
    return {
      together: Math.max(...boxes.map((b) => b.top)) < Math.min(...boxes.map((b) => b.bottom)),
      broken: items.filter((item) => lines(item) > 1).map((item) => item.textContent),
      words: items.map((item) => item.textContent),
    };
  });
  if (!seen.together) throw new Error(`${what}'s header takes more than one line: ${JSON.stringify(seen.words)}`);
  if (seen.broken.length > 0) throw new Error(`${what}'s header breaks ${JSON.stringify(seen.broken)} inside`);
}

async function expectFits(page, what) {
  await expectNoSidewaysScroll(page, what);
  await expectOneLineHeader(page, what);
}

async function expectText(locator, text, what) {
  try {
    await locator.filter({ hasText: text }).first().waitFor({ timeout: WAIT_MS });
  } catch {
    const shown = (await locator.allTextContents()).join(' | ').slice(0, 300);
    throw new Error(`${what} should contain ${JSON.stringify(text)}; it shows ${JSON.stringify(shown)}`);
  }
}

/** The review page's card: the description and the arguments with the override spelled out, who asked, who it
 * waits for, the deadline, and the form. */
async function expectCard(page) {
  const card = page.getByTestId('approval-row');
  await expectText(card.getByTestId('description'), 'Pay 700 USD to "⟨U+202E⟩okanaH', 'the description');
  await expectText(card.getByTestId('args'), '⟨U+202E⟩okanaH', 'the arguments');
  await expectText(card.getByTestId('quorum'), 'waiting for finance', 'the quorum');
  await expectText(card.getByTestId('deadline'), 'expires in', 'the deadline');
  await card.getByTestId('reason').waitFor({ timeout: WAIT_MS });
  return card;
}

// -- scenarios -----------------------------------------------------------------------------------------------------

const SCENARIOS = {
  async look(run, browser) {
    for (const viewport of [PHONE, LAPTOP]) {
      const width = viewport.width;
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      run.watch(page, `${width} px`);
      await run.do(`the mailbox at ${width} px: both mails, links wrapped`, async () => {
        await page.goto(`${BASE}/mailbox`);
        if ((await page.getByTestId('mail').count()) < 2) throw new Error('the mailbox shows fewer than 2 mails');
        await expectFits(page, 'the mailbox');
      });
      await run.shot(page, `mailbox-${width}`);
      await run.do(`the review page at ${width} px: the inbox's card, the deadline counting down`, async () => {
        await page.goto(LINKS[0]);
        const card = await expectCard(page);
        await expectFits(page, 'the review page');
        const before = await card.getByTestId('deadline').textContent();
        await page.waitForFunction(
          (was) => document.querySelector('[data-testid="deadline"]').textContent !== was,
          before,
          { timeout: 5000 },
        );
      });
      await run.shot(page, `review-${width}`);
      await run.do(`the inbox at ${width} px: its header on one line`, async () => {
        await page.goto(`${BASE}/approvals`);
        await page.getByTestId('token-input').fill(TOKEN);
        await page.getByTestId('token-submit').click();
        await page.getByTestId('approval-row').first().waitFor({ timeout: WAIT_MS });
        await page.getByTestId('whoami').waitFor({ timeout: WAIT_MS });
        await expectFits(page, 'the inbox');
      });
      await run.shot(page, `inbox-${width}`);
      await context.close();
    }
  },

  async decide(run, browser) {
    const scripted = await (await browser.newContext({ viewport: PHONE })).newPage();
    run.watch(scripted, 'JavaScript on');
    await run.do('approve from the first link with JavaScript on', async () => {
      await scripted.goto(LINKS[0]);
      const card = await expectCard(scripted);
      await card.getByTestId('reason').fill('fine by me');
      await card.getByTestId('approve').click();
      await expectText(scripted.locator('h2'), 'You approved it', 'the answer');
      await expectText(scripted.getByTestId('quorum'), '1 of 2', 'the quorum');
      await expectFits(scripted, 'the answer');
    });
    await run.shot(scripted, 'approved-with-javascript');

    const plain = await (await browser.newContext({ viewport: PHONE, javaScriptEnabled: false })).newPage();
    run.watch(plain, 'JavaScript off', { scriptsOff: true });
    await run.do('the second link with JavaScript off: the server-rendered card and form', async () => {
      await plain.goto(LINKS[1]);
      await expectCard(plain);
      await expectText(plain.getByTestId('quorum'), '1 of 2', 'the quorum');
      await expectFits(plain, 'the review page without JavaScript');
    });
    await run.shot(plain, 'review-without-javascript');
    await run.do('approve with JavaScript off: the plain form decides', async () => {
      await plain.getByTestId('approve').click();
      await expectText(plain.locator('h2'), 'You approved it', 'the answer');
      await expectText(plain.getByTestId('state'), 'approved', 'the state');
      await expectFits(plain, 'the answer without JavaScript');
    });
    await run.shot(plain, 'approved-without-javascript');
  },
};

async function main() {
  const scenario = process.argv[2];
  if (!SCENARIOS[scenario]) throw new Failure(`usage: node tests/js/review.mjs <${Object.keys(SCENARIOS).join('|')}>`);
  if (!BASE || !TOKEN || LINKS.length < 2) throw new Failure('SIGNOFF_BASE, SIGNOFF_TOKEN and two SIGNOFF_LINKS are needed');
  mkdirSync(ARTIFACTS, { recursive: true });
  const run = new Run(scenario);
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  try {
    await SCENARIOS[scenario](run, browser);
    console.error(`[review-${scenario}] passed`);
    console.log('{}');
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.error(error instanceof Failure ? `FAILED: ${error.message}` : error);
  process.exit(1);
});
