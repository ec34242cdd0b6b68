// The new user's journeys in a real browser against `sextant serve`, fed live bytes over a
// pty: Serial Studio projects in the shapes of its own examples (tabs, painter, waterfall,
// GPS and IMU groups fed `frame.split(',')` text, batched samples) import with their tabs,
// say what they stand in for and show numbers; the import report reads lost behaviour
// first (screenshots in light/dark × English/简体中文); what Quick plot found is kept on
// the Dashboard in one click.
import assert from "node:assert/strict";
import { closeSync, copyFileSync, openSync, readFileSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import {
  artifacts, feed, listen, ptyPair, repo, requireFile, requireProgram, servedUrl, sextantBin, start, tempDir, waitFor,
} from "./harness.mjs";

const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run",
];
const SHAPES = join(repo, "fixtures/serial-studio-shapes");
let server, browser, pty, dir, stopFeed;

before(async () => {
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(repo, "ui/dist/index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  dir = tempDir("sextant-journeys-");
  pty = await ptyPair(dir);
  const port = 7900 + Math.floor(Math.random() * 90);
  const proc = start(`journeys-${port}`, sextantBin, ["serve", "--http-port", String(port), "--ui", join(repo, "ui/dist"), "--data-dir", join(dir, "data"), "--allow-folder", dir], { cwd: dir });
  server = { url: await servedUrl(proc), stop: proc.stop };
  browser = await chromium.launch({ executablePath: chrome, args: CHROMIUM_ARGS });
});

after(async () => {
  stopFeed?.();
  await browser?.close();
  server?.stop();
  pty?.stop();
});

async function fresh(settings = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  await context.addInitScript((s) => {
    localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en", ...s }));
  }, settings);
  const p = await context.newPage();
  p.on("pageerror", (e) => console.error("page error:", e.message));
  await p.goto(server.url);
  await p.waitForSelector(".shell");
  return p;
}

async function nav(p, screen) {
  await p.click(`[data-nav="${screen}"]`);
  if (screen === "connect") await p.locator('[data-screen="connect"][data-ready="true"]').waitFor();
}

/** Opening, importing or starting a project replaces the open one: when it has unsaved
 *  edits (a test before left some), the app asks first – the tests discard them. */
async function discardIfAsked(p) {
  const dialog = p.locator('[data-testid="replace-dialog"]');
  try {
    await dialog.waitFor({ timeout: 700 });
  } catch {
    return false;
  }
  await p.click('[data-testid="replace-discard"]');
  return true;
}

/** Imports `name` from the shapes folder through the Import button's file chooser. */
async function importShape(p, name) {
  const file = join(dir, name);
  copyFileSync(join(SHAPES, name), file);
  await nav(p, "project");
  const chooser = p.waitForEvent("filechooser", { timeout: 8000 });
  await p.click('[data-testid="project-import"]');
  await discardIfAsked(p);
  await (await chooser).setFiles(file);
  await p.locator('[data-testid="import-report"]').waitFor({ timeout: 10000 });
}

/** Dataset title → id of the open project, read over the UI's own WebSocket door. */
function datasetIds(p) {
  return p.evaluate(async () => {
    const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
    const project = await new Promise((resolve) => {
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
        ws.send(JSON.stringify({ type: "command", id: 1, command: "project.get" }));
      };
      ws.onmessage = (e) => JSON.parse(e.data).id === 1 && resolve(JSON.parse(e.data).result);
    });
    ws.close();
    return Object.fromEntries(project.groups.flatMap((g) => g.datasets.map((d) => [d.title, d.id])));
  });
}

/** Connects the open project's first source to the pty and feeds it `lineAt(i)`. */
async function connectFed(p, lineAt, everyMs = 20) {
  await nav(p, "connect");
  // A test that failed half-way may have left its source connected.
  const stale = p.locator('[data-testid="disconnect"]');
  if (await stale.isVisible()) {
    stopFeed?.();
    await stale.click();
    await p.locator('[data-testid="connection-status"][data-state="disconnected"]').waitFor({ timeout: 10000 });
  }
  await p.selectOption('[data-testid="source-type"]', "serial");
  await p.fill('[data-testid="serial-port"]', pty.a);
  await p.click('[data-testid="connect"]');
  await p.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
  stopFeed = feed(pty.b, lineAt, everyMs);
}

/** What a person must never read on a page: a registry command's or a tool's name, an
 *  error code's name, a generated id. Checked on every page a journey ends on (and on each
 *  screen it passed through, by visiting them all). */
/** Every registry command (from the generated reference) and the assistant's own tools. */
const COMMANDS = [
  ...[...readFileSync(join(repo, "docs/commands.md"), "utf8").matchAll(/^## `([a-zA-Z.]+)`$/gm)].map((m) => m[1]),
  "meta.executeCommand", "meta.loadSkill", "assistant.memory.propose", "assistant.sessions.search", "assistant.sessions.cite",
];
const INTERNALS = [
  new RegExp(`\\b(?:${COMMANDS.sort((a, b) => b.length - a.length).map((n) => n.replace(/\./g, "[._]")).join("|")})\\b`),
  /\b(?:NotFound|notFound|needsConfirmation|NeedsConfirmation|notAllowed|NotAllowed|badRequest|BadRequest|unknownCommand|invalidParams|invalid_params)\b/,
  /\b(?:src|ds|act|ws|grp)-\d+\b/,
];

async function assertNoInternals(p) {
  for (const screen of ["dashboard", "connect", "project", "recording", "settings"]) {
    await nav(p, screen);
    await p.waitForTimeout(150);
    const text = await p.locator("main, .shell").first().innerText();
    for (const re of INTERNALS) {
      const hit = re.exec(text);
      assert.equal(hit, null, `the ${screen} screen shows "${hit?.[0]}": …${text.slice(Math.max(0, (hit?.index ?? 0) - 60), (hit?.index ?? 0) + 60)}…`);
    }
  }
}

async function disconnect(p) {
  stopFeed?.();
  stopFeed = null;
  await nav(p, "connect");
  await p.click('[data-testid="disconnect"]');
  await p.locator('[data-testid="connection-status"][data-state="disconnected"]').waitFor({ timeout: 10000 });
}

/** Waits until every dataset of `titles` shows a finite number on the dashboard. */
async function numbersFor(p, titles) {
  const ids = await datasetIds(p);
  const value = (title) => p.evaluate((id) => window.__sextantValue?.(id), ids[title]);
  for (const title of titles) {
    assert.ok(ids[title], `no dataset titled ${title}: ${Object.keys(ids)}`);
    await waitFor(`a number for ${title}`, async () => Number.isFinite(await value(title)), 15000, 200);
  }
  return value;
}

test("a project in the Vibration Test Rig shape imports with its tabs and its painter draws", async () => {
  const p = await fresh();
  await importShape(p, "vibration-rig.ssproj");
  // Lost behaviour first, in warning colour: the control script; the painter is not lost.
  const first = p.locator('[data-testid="import-section"]').first();
  assert.equal(await first.getAttribute("data-severity"), "lost");
  assert.doesNotMatch(await first.innerText(), /VU Meter/);
  assert.equal(await p.locator('[data-testid="import-line"]', { hasText: "fftWindow" }).count(), 0, "Serial Studio's default FFT window is not news");
  await p.screenshot({ path: join(artifacts, "journey-rig-report.png") });

  let i = 0;
  await connectFed(p, () => {
    const t = i++ / 20;
    return `${Math.sin(t).toFixed(3)},${(3000 + 100 * Math.cos(t)).toFixed(0)},${(-20 + 5 * Math.sin(t)).toFixed(1)},${(-22 + 5 * Math.cos(t)).toFixed(1)},${(60 + (i % 5)).toFixed(1)}\n`;
  });
  await nav(p, "dashboard");
  await p.locator('[data-testid="workspace-tab"]', { hasText: "Motor" }).waitFor();
  const tabs = await p.locator('[data-testid="workspace-tab"]').allInnerTexts();
  assert.deepEqual(tabs.map((s) => s.trim()), ["Overview", "Vibration (Campbell)", "VU Meter", "Motor"]);
  const value = await numbersFor(p, ["Vibration", "Mic L", "Mic R", "Motor RPM", "Motor temperature"]);
  assert.ok(Math.abs(await value("Vibration")) <= 1.001);
  // The Overview shows the painter's group, drawn by its own script.
  const painter = p.locator('[data-testid="widget"][data-title="VU Meter"] [data-testid="painter"]');
  await painter.waitFor();
  await waitFor("the painter drawing", async () => Number(await painter.getAttribute("data-frames")) >= 3, 15000, 100);
  assert.equal(await painter.getAttribute("data-state"), "running");
  await p.locator('[data-testid="workspace-tab"]', { hasText: "Motor" }).click();
  await p.locator('[data-testid="widget"][data-title="Motor RPM"]').waitFor();
  assert.equal(await p.locator('[data-testid="widget"]').count(), 6, "the Motor tab's six widgets");
  await p.waitForTimeout(500);
  await p.screenshot({ path: join(artifacts, "journey-rig-motor.png") });
  await disconnect(p);
  await assertNoInternals(p);
  await p.close();
});

test("a project in the TinyGPS and MPU6050 shape shows numbers on its map, accelerometer and gyroscope", async () => {
  const p = await fresh();
  await importShape(p, "gps-imu.ssproj");
  let i = 0;
  await connectFed(p, () => {
    i++;
    // Text from frame.split(','), framed /* … */ as the examples do.
    return `/*${(45.5017 + i / 1e5).toFixed(5)},-73.5673,${(35 + (i % 7)).toFixed(1)},0.12,-0.05,9.81,${(i % 30) - 15},2.5,-1.25,${(21 + (i % 3)).toFixed(1)}*/`;
  });
  await nav(p, "dashboard");
  await p.locator('[data-testid="workspace-tab"]').first().waitFor();
  assert.deepEqual((await p.locator('[data-testid="workspace-tab"]').allInnerTexts()).map((s) => s.trim()), ["Overview"]);
  const value = await numbersFor(p, ["Latitude", "Longitude", "Altitude", "Accel X", "Accel Z", "Gyro X", "Gyro Z", "Temperature"]);
  assert.ok(Math.abs((await value("Latitude")) - 45.5) < 0.1);
  assert.equal(await value("Longitude"), -73.5673);
  assert.equal(await value("Accel Z"), 9.81);
  assert.equal(await value("Gyro Z"), -1.25);
  for (const kind of ["gps", "accelerometer", "gyroscope"]) {
    assert.equal(await p.locator(`[data-testid="widget"][data-widget-kind="${kind}"]`).count(), 1, `one ${kind} tile`);
  }
  await p.waitForTimeout(500);
  await p.screenshot({ path: join(artifacts, "journey-gps-imu.png") });
  await disconnect(p);
  await assertNoInternals(p);
  await p.close();
});

test("a project in the EM Wave shape plots the samples of each batch and draws its 3-D plot", async () => {
  const p = await fresh();
  await importShape(p, "em-wave.ssproj");
  assert.equal(await p.locator('[data-testid="import-section"][data-severity="lost"]', { hasText: "Wave in 3-D" }).count(), 0);
  let i = 0;
  await connectFed(p, () => {
    // Eight samples a frame: `t;ex,ey,bz;…`.
    const samples = [];
    for (let k = 0; k < 8; k++, i++) samples.push(`${Math.sin(i / 10).toFixed(4)},${Math.cos(i / 10).toFixed(4)},${Math.sin(i / 5).toFixed(4)}`);
    return `${i};${samples.join(";")}\n`;
  }, 40);
  await nav(p, "dashboard");
  const value = await numbersFor(p, ["E x", "E y", "B z", "X", "Z"]);
  assert.ok(Math.abs(await value("E x")) <= 1.0001);
  const threeD = p.locator('[data-testid="widget"][data-title="Wave in 3-D"] [data-testid="plot3d"]');
  await threeD.waitFor();
  await waitFor("a 3-D trail", async () => Number(await threeD.getAttribute("data-points")) > 10, 15000, 100);
  await p.waitForTimeout(500);
  await p.screenshot({ path: join(artifacts, "journey-em-wave.png") });
  await disconnect(p);
  await assertNoInternals(p);
  await p.close();
});

test("the import report in light and dark, English and 简体中文", async () => {
  for (const theme of ["light", "dark"]) {
    for (const language of ["en", "zh"]) {
      const p = await fresh({ theme, language });
      await importShape(p, "vibration-rig.ssproj");
      const report = p.locator('[data-testid="import-report"]');
      const heading = await report.locator('[data-testid="import-section"][data-severity="lost"] h4').innerText();
      assert.equal(heading.trim(), language === "zh" ? "项目不再具备的功能" : "What the project no longer does");
      await p.locator('[data-testid="import-section"][data-severity="note"] summary').click();
      await report.screenshot({ path: join(artifacts, `import-report-${theme}-${language}.png`) });
      await p.close();
    }
  }
});

test("what Quick plot found is kept on the Dashboard in one click", async () => {
  const p = await fresh();
  await nav(p, "project");
  await p.click('[data-testid="project-new"]');
  await discardIfAsked(p);
  await nav(p, "connect");
  await p.selectOption('[data-testid="source-type"]', "serial");
  await p.fill('[data-testid="serial-port"]', pty.a);
  assert.equal(await p.inputValue('[data-testid="parser-kind"]'), "quickPlot");
  await p.click('[data-testid="connect"]');
  await p.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
  let i = 0;
  stopFeed = feed(pty.b, () => (i++ === 0 ? "temp,altitude\n" : `${(21 + (i % 4) / 4).toFixed(2)},${405 + (i % 3)}\n`));
  await nav(p, "quickplot");
  await p.locator('[data-testid="quickplot-keep"]').click();
  await p.locator('[data-testid="quickplot-keep-message"].ok').waitFor({ timeout: 5000 });
  await p.locator('[data-testid="quickplot-keep"]').waitFor({ state: "detached", timeout: 5000 });
  await nav(p, "dashboard");
  const value = await numbersFor(p, ["temp", "altitude"]);
  assert.ok((await value("altitude")) >= 405);
  await p.locator('[data-testid="widget"][data-title="Quick plot"], [data-testid="widget"][data-title="temp"]').first().waitFor({ timeout: 5000 });
  await p.screenshot({ path: join(artifacts, "journey-quickplot-kept.png") });
  await disconnect(p);
  await assertNoInternals(p);
  await p.close();
});

/** A device that sends nothing until polled: it answers every `R` it reads on `path` with
 *  `reply`; `count(byte)` is how many of that byte it was sent. */
function polledDevice(path, reply) {
  const heard = listen(path);
  const fd = openSync(path, "w");
  let answered = 0;
  const timer = setInterval(() => {
    const polls = heard.count("R");
    for (; answered < polls; answered++) writeSync(fd, reply);
  }, 5);
  return {
    count: (ch) => heard.count(ch),
    stop() {
      clearInterval(timer);
      closeSync(fd);
      heard.stop();
    },
  };
}

test("a device that answers only when polled shows data, and the dashboard's action buttons send", async () => {
  const p = await fresh();
  await importShape(p, "polled-adc.ssproj");
  const device = polledDevice(pty.b, Buffer.from([0x03, 0xff, 0x0a]));
  try {
    await nav(p, "connect");
    await p.selectOption('[data-testid="source-type"]', "serial");
    await p.fill('[data-testid="serial-port"]', pty.a);
    await p.click('[data-testid="connect"]');
    // Connecting starts sends nobody clicked (the wake-up and the poll): the person is asked
    // first, in words that say what will be sent, and nothing is sent before the yes.
    const dialog = p.locator('[data-testid="confirm-dialog"]');
    await dialog.waitFor();
    const question = await dialog.innerText();
    assert.match(question, /without a click/);
    assert.match(question, /“Wake”/);
    assert.match(question, /every \d+ ms while connected/);
    await p.screenshot({ path: join(artifacts, "journey-polled-adc-consent.png") });
    assert.equal(device.count("R") + device.count("W"), 0, "sent before the person said yes");
    await p.click('[data-testid="confirm-yes"]');
    await p.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
    await nav(p, "dashboard");
    // The imported timer polls from the connection on: the board's answer is on the dashboard.
    const value = await numbersFor(p, ["Voltage"]);
    assert.equal(await value("Voltage"), 5);
    await waitFor("ten polls", () => device.count("R") >= 10);
    // Sent once on connect; a click on its button sends it again (the click is the yes).
    assert.equal(device.count("W"), 1);
    const wake = p.locator('[data-testid="action-button"]', { hasText: "Wake" });
    await wake.waitFor();
    assert.match((await wake.getAttribute("title")) ?? "", /once/);
    await wake.click();
    await waitFor("the clicked send", () => device.count("W") === 2);
    // Every send is in the console, marked as sent.
    await p.click('[data-testid="open-console"]');
    await waitFor("the sends in the console", async () => /→ W␊/.test(await p.locator('[data-testid="console-output"]').innerText()));
    await p.screenshot({ path: join(artifacts, "journey-polled-adc.png") });
    for (const [theme, language] of [["light", "en"], ["dark", "en"], ["light", "zh"], ["dark", "zh"]]) {
      const q = await fresh({ theme, language });
      await nav(q, "dashboard");
      await q.locator('[data-testid="action-bar"]').screenshot({ path: join(artifacts, `action-bar-${theme}-${language}.png`) });
      await q.close();
    }
    await disconnect(p);
    // Nothing is sent after the disconnect.
    const polls = device.count("R");
    await p.waitForTimeout(400);
    assert.equal(device.count("R"), polls, "a poll after the disconnect");
    // The yes holds for these very sends: the next Connect asks nothing.
    await nav(p, "connect");
    await p.click('[data-testid="connect"]');
    await p.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
    assert.equal(await p.locator('[data-testid="confirm-dialog"]').count(), 0, "asked again for the same sends");
    await disconnect(p);
    await assertNoInternals(p);
  } finally {
    device.stop();
    await p.close();
  }
});

test("what a new user reads now, in light and dark, English and 简体中文", async () => {
  for (const [theme, language] of [["light", "en"], ["dark", "en"], ["light", "zh"], ["dark", "zh"]]) {
    const p = await fresh({ theme, language });
    const shot = (name) => join(artifacts, `words-${name}-${theme}-${language}.png`);
    // A port that does not exist: never "Connected", and why not.
    await nav(p, "project");
    await p.click('[data-testid="project-new"]');
    await discardIfAsked(p);
    await nav(p, "connect");
    await p.selectOption('[data-testid="source-type"]', "serial");
    await p.fill('[data-testid="serial-port"]', join(dir, "no-such-port"));
    await p.click('[data-testid="connect"]');
    const info = p.locator('[data-testid="connect-info"]');
    await waitFor("the connect message", async () => (await info.getAttribute("data-state")) === "connect.notConnectedInfo", 10000);
    await info.screenshot({ path: shot("not-connected") });
    await p.click('[data-testid="disconnect"]');
    await p.locator('[data-testid="connection-status"][data-state="disconnected"]').waitFor({ timeout: 10000 });
    // A shared project whose action sends on connect: the question, in the person's words.
    const shared = join(dir, `wakes-${theme}-${language}.sextant.json`);
    writeFileSync(shared, JSON.stringify({
      format: "sextant-project", schemaVersion: 1, title: "Shared bench",
      sources: [{ id: "dev", title: "Bench supply", parser: { kind: "delimited" },
        connection: { type: "tcp", host: "127.0.0.1", port: 9 } }],
      groups: [{ id: "g", title: "Bench", datasets: [{ id: "v", title: "V", index: 1 }] }],
      actions: [{ id: "a", title: "Wake", payload: "WAKE", lineEnding: "lf", onConnect: true, timerMs: 500 }],
    }));
    await nav(p, "project");
    await p.fill('[data-testid="project-path"]', shared);
    await p.click('[data-testid="project-open-path"]');
    await discardIfAsked(p);
    await nav(p, "connect");
    await p.click('[data-testid="connect"]');
    const consent = p.locator('[data-testid="confirm-dialog"]');
    await consent.waitFor();
    const question = (await consent.innerText()).replace(/Wake|WAKE|Bench supply|Sextant/g, "");
    if (language === "zh") assert.doesNotMatch(question, /[A-Za-z]{2,}/, "English left in the question");
    await consent.screenshot({ path: shot("consent-sends") });
    await p.click('[data-testid="confirm-no"]');
    // The no is said back in the person's words, not as the question again.
    const declined = await p.locator('[data-testid="connect-error"]').innerText();
    assert.equal(declined, language === "zh" ? "未执行：你选择了不允许。" : "Not done: you said no.");
    // Save as: a dialog of its own.
    await nav(p, "project");
    await p.click('[data-testid="project-save-as"]');
    const dialog = p.locator('[data-testid="save-as-dialog"]');
    await dialog.waitFor();
    await dialog.screenshot({ path: shot("save-as") });
    await p.click('[data-testid="save-as-cancel"]');
    // The assistant with no provider set up: what to do, not a send that fails.
    await p.click('[data-testid="chat-toggle"]');
    const setup = p.locator('[data-testid="chat-needs-setup"]');
    await setup.waitFor({ timeout: 10000 });
    await setup.screenshot({ path: shot("chat-setup") });
    assert.equal(await p.locator('[data-testid="chat-send"]').isDisabled(), true);
    // Developer figures only under Diagnostics.
    await p.click('[data-testid="chat-settings"]');
    // The model's limits: empty means automatic, and each says what it is now and why.
    const limits = p.locator('[data-testid="chat-limits"]');
    await limits.waitFor();
    assert.equal(await p.inputValue('[data-testid="chat-limit-contextWindow"]'), "");
    assert.equal(await p.locator('[data-testid="chat-limit-contextWindow-now"]').getAttribute("data-from"), "table");
    await limits.screenshot({ path: shot("model-limits") });
    await p.click('[data-testid="chat-diagnostics-toggle"]');
    await p.locator('[data-testid="chat-health"]').waitFor({ timeout: 10000 });
    await p.locator('[data-testid="chat-health"]').screenshot({ path: shot("diagnostics") });
    await assertNoInternals(p);
    await p.close();
  }
});

