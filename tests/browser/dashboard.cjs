// Drives /ui in headless Chromium (playwright-core, the Debian chromium binary) for
// crates/toolgate-cli/tests/test_dashboard_browser.rs. Environment: TG_BASE (the gateway),
// TG_ADMIN and TG_READER (keys), TG_DIRECT (the direct total `toolgate tokens --json`
// printed), TG_SCREENSHOT (where to save the page), CHROMIUM (the browser binary).
// Protocol on stdio: prints "loaded" once the first figures are checked, waits for a line
// on stdin (the test has made its calls), checks the page updated, prints "ok".
"use strict";
const { chromium } = require("playwright-core");
const fs = require("fs");
const os = require("os");
const path = require("path");
const readline = require("readline");

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(k + " is not set"); return v; };
const base = env("TG_BASE");
const fail = (why) => { console.error("FAIL " + why); process.exit(1); };

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "toolgate-chromium-"));
  // A fresh profile (playwright passes it as --user-data-dir).
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: env("CHROMIUM"),
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    // A key without admin is refused.
    const reader = await browser.newPage();
    await reader.setExtraHTTPHeaders({ authorization: "Bearer " + env("TG_READER") });
    const refused = await reader.goto(base + "/ui");
    if (refused.status() !== 403) fail("a key without admin got HTTP " + refused.status());
    await reader.close();

    const page = await browser.newPage();
    await page.setExtraHTTPHeaders({ authorization: "Bearer " + env("TG_ADMIN") });
    const errors = [];
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    page.on("pageerror", (e) => errors.push(String(e)));
    const res = await page.goto(base + "/ui");
    if (res.status() !== 200) fail("the admin key got HTTP " + res.status());
    await page.waitForSelector("#total-direct", { timeout: 30000 });
    const shown = await page.getAttribute("#total-direct", "data-tokens");
    if (shown !== env("TG_DIRECT")) fail("the page shows " + shown + " direct tokens, toolgate tokens --json says " + env("TG_DIRECT"));
    const updates = Number(await page.evaluate(() => document.body.dataset.updates));
    console.log("loaded");
    const rl = readline.createInterface({ input: process.stdin });
    await new Promise((resolve, reject) => {
      rl.once("line", resolve);
      rl.once("close", () => reject(new Error("the test closed stdin before its calls were made")));
      setTimeout(() => reject(new Error("no word from the test in 120 s")), 120000).unref();
    });
    // The page polls /ui/data: wait for the calls to show.
    await page.waitForFunction(() => Number(document.getElementById("route-count").textContent) >= 1
      && [...document.querySelectorAll("#upstreams tbody tr")].some((tr) => Number(tr.children[4].textContent) >= 1)
      && document.querySelectorAll("#sessions tbody tr").length >= 1, null, { timeout: 30000 });
    const later = Number(await page.evaluate(() => document.body.dataset.updates));
    if (!(later > updates)) fail("the page did not refresh");
    await page.screenshot({ path: env("TG_SCREENSHOT"), fullPage: true });
    if (errors.length) fail("console errors: " + errors.join(" | "));
    console.log("ok");
    rl.close();
  } finally {
    await browser.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
})().catch((e) => fail(e.stack || String(e)));
