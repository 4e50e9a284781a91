// The inbox at a phone's width (390 × 844) shows a coding agent's calls as blocks people judge: an `Edit` as
// a unified diff in a code block (its lines marked added and removed, a hidden character spelled out) and a
// `Bash` call as its command with where it runs, and nothing on the page scrolls sideways, the diff's long line
// included: it wraps inside its block.
//
// Usage: SIGNOFF_BASE=http://127.0.0.1:8000 SIGNOFF_TOKEN=<admin token> SIGNOFF_APPROVALS='{"edit": "<id>",
//        "bash": "<id>"}' SIGNOFF_ARTIFACTS=artifacts/screenshots node tests/js/code_view.mjs
//
// Exits 1 naming what it missed, and on any console error, uncaught page error or HTTP error answer. Prints
// `{}` on stdout when it passes. Screenshot: $SIGNOFF_ARTIFACTS/code-view-390.png.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const BASE = (process.env.SIGNOFF_BASE ?? '').replace(/\/$/, '');
const TOKEN = process.env.SIGNOFF_TOKEN ?? '';
const APPROVALS = JSON.parse(process.env.SIGNOFF_APPROVALS || '{}');
const ARTIFACTS = process.env.SIGNOFF_ARTIFACTS ?? 'artifacts/screenshots';
const WAIT_MS = 30_000;

const problems = [];
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
});
try {
  const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
  page.on('console', (m) => ['error', 'warning'].includes(m.type()) && problems.push(`console: ${m.text()}`));
  page.on('pageerror', (error) => problems.push(`uncaught: ${error.message}`));
  page.on('response', (r) => r.status() >= 400 && problems.push(`HTTP ${r.status()} for ${r.url()}`));
  await page.goto(`${BASE}/approvals`);
  await page.getByTestId('token-input').fill(TOKEN);
  await page.getByTestId('token-submit').click();
  const row = (id) => page.locator(`[data-approval-id="${id}"]`);
  await row(APPROVALS.edit).locator('pre[data-testid="code"]').waitFor({ timeout: WAIT_MS });
  await row(APPROVALS.bash).locator('pre[data-testid="code"]').waitFor({ timeout: WAIT_MS });
  const seen = await page.evaluate(({ edit, bash }) => {
    const block = (id) => document.querySelector(`[data-approval-id="${id}"] pre[data-testid="code"]`);
    const lines = (pre) => [...pre.querySelectorAll('span')].map((s) => [s.className, s.textContent]);
    const diff = block(edit);
    return {
      wide: document.documentElement.scrollWidth,
      viewport: window.innerWidth,
      diff: { className: diff.className, lines: lines(diff), overflow: diff.scrollWidth - diff.clientWidth },
      diffBox: diff.getBoundingClientRect().right,
      bash: { name: block(bash).closest('div').querySelector('dt').textContent, lines: lines(block(bash)) },
    };
  }, APPROVALS);
  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, 'code-view-390.png'), fullPage: true });
  const expect = (ok, what) => ok || problems.push(`${what}: ${JSON.stringify(seen)}`);
  expect(seen.wide <= seen.viewport, `the page is ${seen.wide} pixels wide at ${seen.viewport}`);
  expect(seen.diff.overflow <= 0 && seen.diffBox <= seen.viewport, 'the diff overflows its block');
  expect(seen.diff.className === 'code code-diff', 'the diff is no code block');
  const classes = seen.diff.lines.map(([c]) => c);
  expect(classes.includes('line line-add') && classes.includes('line line-del'), 'no line marked as changed');
  expect(seen.diff.lines.some(([, text]) => text.includes('⟨U+202E⟩')), 'the override is not spelled out');
  expect(seen.bash.name === 'command in /home/dev/shop', 'the command does not say where it runs');
  expect(seen.bash.lines.length === 3, 'the command is not its three lines');
} catch (error) {
  problems.push(error.message.split('\n')[0]);
} finally {
  await browser.close();
}
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log('{}');
