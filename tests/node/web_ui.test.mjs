// The web UI in headless Chromium (Debian's /usr/bin/chromium driven by playwright-core): send a
// message, watch the answer stream in, press stop, start a new chat; model HTML never runs; server
// errors are shown. Saves a screenshot under the build directory.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { startServer } from "./server_process.mjs";

const CHROMIUM = "/usr/bin/chromium";
const ARTIFACTS = process.env.TINYLLM_ARTIFACTS || join(process.cwd(), "artifacts");
const skip = existsSync(CHROMIUM) ? false : `SKIPPED: ${CHROMIUM} is not installed (scripts/install-deps.sh --test installs it)`;

let server, context, profile;
before(async () => {
  if (skip) return;
  // Slow and long, so there is time to see it stream and to stop it.
  server = startServer(process.env.TINYLLM_FAKE, ["serve", "--port", "0", "--delay", "15", "--words", "400"]);
  await server.url;
  profile = mkdtempSync(join(tmpdir(), "tinyllm-chromium-"));
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
    viewport: { width: 1100, height: 760 },
  });
});
after(async () => {
  await context?.close();
  server?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
});

test("chat in the web UI: stream, stop, new chat", { skip, timeout: 60000 }, async () => {
  const page = context.pages()[0] || (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await page.goto(await server.url);
  await page.waitForFunction(() => document.getElementById("model-name").textContent === "fake-model");

  // The model echoes the message: HTML in it must show as text, not run.
  await page.fill("#input", 'Hi <img src=x onerror="window.pwned=1"> there');
  await page.press("#input", "Enter");
  const answer = page.locator(".msg.assistant .content").last();
  await page.waitForFunction(() => (document.querySelector(".msg.assistant .content")?.textContent || "").includes("word word"));
  assert.ok(await page.isVisible("#stop"), "the stop button shows while the answer streams");
  const early = (await answer.textContent()).length;
  await page.waitForTimeout(300);
  const later = (await answer.textContent()).length;
  assert.ok(later > early, `the answer keeps growing while streaming (${early} -> ${later})`);
  assert.equal(await page.locator(".msg.assistant strong").first().textContent(), 'Hi <img src=x onerror="window.pwned=1"> there');
  assert.equal(await page.locator(".msg.assistant img").count(), 0);
  assert.equal(await page.evaluate(() => window.pwned), undefined);
  assert.ok((await page.locator(".msg.assistant .content p").count()) >= 2, "paragraphs are rendered as markdown");

  mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: join(ARTIFACTS, "web_ui_streaming.png") });

  await page.click("#stop");
  await page.waitForSelector("#send", { state: "visible" });
  const stopped = (await answer.textContent()).length;
  await page.waitForTimeout(300);
  assert.equal((await answer.textContent()).length, stopped, "nothing arrives after stop");
  assert.ok(stopped < 2000, "the answer was cut short");
  // The server noticed too: the next request is answered at once, not after the rest of the story.
  const health = await page.evaluate(async () => (await fetch("/metrics")).text());
  assert.match(health, /tinyllm_requests_processing 0/);
  await page.screenshot({ path: join(ARTIFACTS, "web_ui_stopped.png") });

  // Regenerate replaces the stopped answer with a new one.
  await page.click(".msg.assistant .regenerate");
  await page.waitForSelector("#stop", { state: "visible" });
  await page.click("#stop");
  await page.waitForSelector("#send", { state: "visible" });
  assert.equal(await page.locator(".msg.assistant").count(), 1);

  // Edit and resend: the conversation continues from the edited message; code blocks get a copy button.
  await page.click(".msg.user .edit");
  await page.fill(".msg.user textarea", "Look:\n```\nprint(1)\n```\nok");
  await page.click(".msg.user .actions .primary");
  await page.waitForSelector(".msg.assistant pre code");
  // the block appears with its first streamed characters (and, until the fence closes, the fence's
  // first backticks): read it once the text after it has begun
  await page.waitForFunction(() => document.querySelector(".msg.assistant pre")?.nextElementSibling != null);
  assert.equal(await page.locator(".msg.assistant pre code").first().textContent(), "print(1)");
  assert.equal(await page.locator(".msg.assistant pre button").first().textContent(), "Copy");
  assert.match(await page.locator(".msg.user .text").first().textContent(), /^Look:/);
  await page.click("#stop");
  await page.waitForSelector("#send", { state: "visible" });

  await page.click("#new-chat");
  assert.equal(await page.locator("#messages .msg").count(), 0);
  assert.equal(await page.locator("#conversations li").count(), 2);
  await page.reload();
  await page.waitForFunction(() => document.getElementById("model-name").textContent === "fake-model");
  assert.equal(await page.locator("#conversations li").count(), 2, "conversations are kept in localStorage");
  assert.deepEqual(pageErrors, []);
});

test("the web UI shows the server's error", { skip, timeout: 30000 }, async () => {
  const locked = startServer(process.env.TINYLLM_FAKE, ["serve", "--port", "0", "--api-key", "k"]);
  try {
    const page = await context.newPage();
    await page.goto(await locked.url);
    await page.fill("#input", "hello");
    await page.press("#input", "Enter");
    await page.waitForSelector(".msg.error");
    assert.match(await page.locator(".msg.error").textContent(), /API key/);
    await page.close();
  } finally {
    locked.stop();
  }
});

test("markdown rendering: the supported subset, and nothing executable", { skip, timeout: 30000 }, async () => {
  const page = await context.newPage();
  await page.goto(await server.url);
  const html = await page.evaluate(() => renderMarkdown([
    "# Title", "Some **bold**, *italic* and `code` with a [link](https://example.com/x).",
    "", "- one", "- two", "", "1. first", "2. second", "", "> quoted",
    "", "[bad](javascript:alert(1)) <script>window.pwned=1</script> <b onclick=x>b</b>",
    "", "```python", "if a < b: print('<tag>')", "```",
  ].join("\n")).innerHTML);
  assert.match(html, /<h3>Title<\/h3>/);
  assert.match(html, /<strong>bold<\/strong>/);
  assert.match(html, /<em>italic<\/em>/);
  assert.match(html, /<code>code<\/code>/);
  assert.match(html, /<a href="https:\/\/example.com\/x" target="_blank" rel="noopener noreferrer">link<\/a>/);
  assert.match(html, /<ul><li>one<\/li><li>two<\/li><\/ul>/);
  assert.match(html, /<ol><li>first<\/li><li>second<\/li><\/ol>/);
  assert.match(html, /<blockquote>quoted<\/blockquote>/);
  assert.match(html, /<pre><button type="button">Copy<\/button><code data-lang="python">if a &lt; b: print\('&lt;tag&gt;'\)<\/code><\/pre>/);
  assert.doesNotMatch(html, /href="javascript/);
  assert.doesNotMatch(html, /<script|<b /);
  assert.match(html, /&lt;script&gt;window.pwned=1&lt;\/script&gt;/);
  await page.close();
});

test("several models: the picker lists /v1/models, and a chat goes to the picked model", { skip, timeout: 90000 }, async () => {
  // `tinyllm serve --models-dir` over two names for the built-in model, with an empty Hub cache.
  const dir = mkdtempSync(join(tmpdir(), "tinyllm-models-"));
  const builtin = join(process.cwd(), "..", "..", "models", "stories260K.gguf");
  symlinkSync(builtin, join(dir, "alpha.gguf"));
  symlinkSync(builtin, join(dir, "beta.gguf"));
  process.env.HF_HUB_CACHE = join(dir, "hub-cache");
  const multi = startServer(process.env.TINYLLM_BIN, ["serve", "--port", "0", "--models-dir", dir, "--models-max", "1", "--max-context", "256"]);
  try {
    const url = await multi.url;
    const page = await context.newPage();
    await page.goto(url);
    await page.waitForSelector("#model-picker", { state: "visible" });
    assert.deepEqual(await page.locator("#model-picker option").allTextContents(), ["alpha (unloaded)", "beta (unloaded)"]);
    await page.selectOption("#model-picker", "beta");
    await page.fill("#input", "Once upon a time");
    await page.press("#input", "Enter");
    await page.waitForFunction(() => (document.querySelector(".msg.assistant .content")?.textContent || "").length > 0);
    await page.waitForSelector("#send", { state: "visible", timeout: 60000 });
    const states = Object.fromEntries((await (await fetch(url + "/v1/models")).json()).data.map((m) => [m.id, m.state]));
    assert.deepEqual(states, { alpha: "unloaded", beta: "loaded" });
    await page.close();
  } finally {
    multi.stop();
    delete process.env.HF_HUB_CACHE;
    rmSync(dir, { recursive: true, force: true });
  }
});
