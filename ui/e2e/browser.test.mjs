// The UI in a real browser (Debian's Chromium through playwright-core) against
// `sextant serve`: a pty serial device quick-plotted with zero configuration, a project
// built in the editor then saved and reopened, projects picked in the browser's file
// picker (a Sextant one, a Serial Studio import) or dropped on the window, a recording
// replayed, the quick plot's legend and per-channel scaling, one toast per alarm episode,
// a narrow window with the assistant open, whole labels on the Connect screen, and
// screenshots of every screen in light/dark × English/简体中文.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { connect } from "node:net";
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import {
  artifacts, feed, pageCommand, postgresServer, ptyPair, repo, requireFile, requireProgram, servedUrl, sextantBin, sleep, start, tempDir, waitFor,
} from "./harness.mjs";

const CHROMIUM_ARGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run",
];
let server, browser, page, pty, stopFeed, dir, base;

async function serve(args = []) {
  const port = 7100 + Math.floor(Math.random() * 800);
  // The test's folder is one of the user's: files saved there need no extra yes.
  const proc = start(`serve-${port}`, sextantBin, ["serve", "--http-port", String(port), "--ui", join(repo, "ui/dist"), "--data-dir", join(dir, "assistant"), "--allow-folder", dir, ...args], {
    cwd: dir,
  });
  const url = await servedUrl(proc);
  return { url, stop: proc.stop };
}

async function fresh(url = base, settings = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await context.addInitScript((s) => {
    localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en", ...s }));
  }, settings);
  const p = await context.newPage();
  p.on("pageerror", (e) => console.error("page error:", e.message));
  await p.goto(url);
  await p.waitForSelector(".shell");
  return p;
}

/** Waits for `locator` to be visible; when it does not show, the error carries what the
 *  screen said instead (a refusal, a message), so a failure says why. */
async function shown(p, locator, timeout) {
  try {
    await locator.waitFor({ timeout });
  } catch (e) {
    const screen = await p.locator(".screen").innerText().catch(() => "(no screen)");
    throw new Error(`${e.message}\nThe screen said instead:\n${screen.slice(0, 2000)}`);
  }
}

/** Clicks `button` and picks `file` in the file chooser it opens, as a person would. */
async function pick(p, button, file) {
  const chooser = p.waitForEvent("filechooser", { timeout: 8000 });
  await p.click(`[data-testid="${button}"]`);
  await discardIfAsked(p);
  await (await chooser).setFiles(file);
}

/** Opens the project at `file` by typing its path on the Project screen, as a person can. */
async function openByPath(p, file) {
  await nav(p, "project");
  await p.fill('[data-testid="project-path"]', file);
  await p.click('[data-testid="project-open-path"]');
  await discardIfAsked(p);
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


async function nav(p, screen) {
  await p.click(`[data-nav="${screen}"]`);
  // Connect fills its form from the project once loaded: edit it only after that.
  if (screen === "connect") await p.locator('[data-screen="connect"][data-ready="true"]').waitFor();
}

before(async () => {
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(repo, "ui/dist/index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  dir = tempDir("sextant-browser-");
  pty = await ptyPair(dir);
  server = await serve();
  base = server.url;
  browser = await chromium.launch({ executablePath: chrome, args: CHROMIUM_ARGS });
});

after(async () => {
  stopFeed?.();
  await browser?.close();
  server?.stop();
  pty?.stop();
});

test("a page opened without the launch's secret can do nothing and says how to get in", async () => {
  const bare = base.replace(/\?.*$/, "");
  assert.notEqual(bare, base, "the printed address carries the secret");
  for (const language of ["en", "zh"]) {
    const p = await fresh(bare, { language });
    const notice = p.locator('[data-testid="needs-secret"]');
    await notice.waitFor({ timeout: 10000 });
    assert.equal(await notice.getAttribute("data-access"), "missing");
    const text = await notice.innerText();
    assert.match(text, language === "en" ? /address Sextant printed/ : /启动时打印的地址/);
    assert.doesNotMatch(text, /authenticate|notAllowed|auth/);
    await p.screenshot({ path: join(artifacts, `browser-needs-secret-light-${language}.png`) });
    await p.close();
  }
  // An old secret (a restart gives a new one) is refused and said so; the right one works.
  const old = await fresh(`${bare}?token=${"0".repeat(64)}`);
  await old.locator('[data-testid="needs-secret"][data-access="refused"]').waitFor({ timeout: 10000 });
  await old.close();
  const ok = await fresh(base);
  await ok.waitForSelector('[data-testid="connection-status"]');
  assert.equal(await ok.locator('[data-testid="needs-secret"]').count(), 0);
  // The secret leaves the address bar, and a reload of the tab still proves it.
  assert.doesNotMatch(ok.url(), /token=/);
  await ok.reload();
  await ok.waitForSelector(".shell");
  await sleep(500);
  assert.equal(await ok.locator('[data-testid="needs-secret"]').count(), 0);
  await ok.close();
});

test("a serial device sending CSV is quick-plotted with zero configuration", async () => {
  page = await fresh();
  await nav(page, "connect");
  await page.selectOption('[data-testid="source-type"]', "serial");
  await page.fill('[data-testid="serial-port"]', pty.a);
  await page.fill('[data-testid="baud"]', "115200");
  assert.equal(await page.inputValue('[data-testid="parser-kind"]'), "quickPlot", "quick plot is the default");
  let i = 0;
  stopFeed = feed(pty.b, () => {
    const t = i++ / 50;
    return `${Math.sin(t).toFixed(4)},${Math.cos(t).toFixed(4)},${(t % 1).toFixed(3)}\n`;
  });
  await page.click('[data-testid="connect"]');
  await waitFor("frames per second", async () => {
    const text = await page.textContent('[data-testid="frames-per-s"]');
    return Number.parseFloat(text ?? "0") > 5;
  }, 20000, 250);
  await nav(page, "quickplot");
  const qp = page.locator('[data-testid="quickplot"]');
  await waitFor("three quick-plot series", async () => Number(await qp.getAttribute("data-series-count")) === 3, 20000, 200);
  const drawn = () => qp.locator("canvas").first().evaluate((c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let n = 0;
    for (let k = 3; k < d.length; k += 4) if (d[k]) n++;
    return n;
  });
  await waitFor("a drawn quick plot", async () => (await drawn()) > 500, 10000, 200);
  await page.screenshot({ path: join(artifacts, "browser-quickplot-light-en.png") });
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  stopFeed();
  stopFeed = null;
  await page.close();
});

test("quick plot: a 405 m altitude no longer flattens the other channels when each is scaled", async () => {
  page = await fresh();
  await nav(page, "connect");
  await page.selectOption('[data-testid="source-type"]', "serial");
  await page.fill('[data-testid="serial-port"]', pty.a);
  await page.fill('[data-testid="baud"]', "115200");
  let i = 0;
  stopFeed = feed(pty.b, () => {
    const t = i++ / 50;
    // A 405 m altitude beside two ±1 signals.
    return `${(405 + 0.5 * Math.sin(t / 3)).toFixed(3)},${Math.sin(t * 2).toFixed(4)},${Math.cos(t * 3).toFixed(4)}\n`;
  });
  await page.click('[data-testid="connect"]');
  await nav(page, "quickplot");
  const qp = page.locator('[data-testid="quickplot"]');
  await waitFor("three quick-plot series", async () => Number(await qp.getAttribute("data-series-count")) === 3, 20000, 200);
  await page.waitForTimeout(1500);
  await page.mouse.move(1, 1);

  /** How much of the plot's height the second channel's line covers (0…1). */
  const extent = () => qp.evaluate((el) => {
    const marker = el.querySelectorAll(".u-legend tr.u-series")[2].querySelector(".u-marker");
    const ms = getComputedStyle(marker);
    const colour = (parseFloat(ms.borderTopWidth) > 0 ? ms.borderTopColor : ms.backgroundColor).match(/\d+/g).slice(0, 3).map(Number);
    const over = el.querySelector(".u-over").getBoundingClientRect();
    const c = el.querySelector("canvas");
    const k = c.width / c.getBoundingClientRect().width;
    const cr = c.getBoundingClientRect();
    const [x0, y0, w, h] = [(over.left - cr.left) * k, (over.top - cr.top) * k, over.width * k, over.height * k].map(Math.round);
    const d = c.getContext("2d").getImageData(x0, y0, w, h).data;
    let top = Infinity, bottom = -Infinity;
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const at = (y * w + x) * 4;
        if (d[at + 3] > 200 && Math.abs(d[at] - colour[0]) < 30 && Math.abs(d[at + 1] - colour[1]) < 30 && Math.abs(d[at + 2] - colour[2]) < 30) {
          top = Math.min(top, y);
          bottom = Math.max(bottom, y);
        }
      }
    }
    return bottom >= top ? (bottom - top) / h : 0;
  });
  const shared = await extent();
  assert.ok(shared < 0.1, `on one axis with a 405 m channel the ±1 channel is flat (${shared})`);
  await qp.locator('[data-testid="plot-normalise"]').click();
  await waitFor("the scaled view", async () => (await qp.locator(".plotbox").getAttribute("data-scaling")) === "normalised", 5000);
  await waitFor("the ±1 channel filling the plot", async () => (await extent()) > 0.6, 5000, 250);
  // The legend still reads real values: the altitude, not a share of its range.
  const alt = Number.parseFloat((await qp.locator(".u-legend tr.u-series td.u-value").allInnerTexts())[1]);
  assert.ok(alt > 404 && alt < 406, `altitude reads ${alt}`);
  await page.screenshot({ path: join(artifacts, "browser-quickplot-normalised-light-en.png") });
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  stopFeed();
  stopFeed = null;
  await page.close();
});

test("quick plot: a slower device beside a faster one reads its latest value, not a dash", async () => {
  // Two sources: the simulator at 100 frames/s and a device on the pty four times a
  // second, few points so each dataset's window is decimated on its own (each bucket's
  // extremes, at their own times). The plot's times are the first series': at the live
  // edge the other has no point of its own, and its legend entry read "—".
  const file = join(dir, "two-rates.json");
  writeFileSync(file, JSON.stringify({
    format: "sextant-project", schemaVersion: 1, title: "Two rates",
    sources: [
      { id: "sim", title: "Simulator", parser: { kind: "delimited" },
        connection: { type: "simulator", frameRateHz: 100, channels: [{ name: "Fast", waveform: "sine", frequencyHz: 0.5, amplitude: 1, offset: 0, noise: 0 }], seed: 3 } },
      { id: "bench", title: "Bench", parser: { kind: "delimited" }, connection: { type: "serial", port: pty.a, baud: 115200 } },
    ],
    groups: [{ id: "g", title: "Rates", datasets: [
      { id: "fast", title: "Fast", index: 1, source: "sim" },
      { id: "slow", title: "Slow", index: 1, source: "bench" },
    ] }],
  }));
  page = await fresh(base, { points: 20 });
  await openByPath(page, file);
  await page.locator('[data-testid="tree-dataset"]', { hasText: "Slow" }).first().waitFor();
  let i = 0;
  stopFeed = feed(pty.b, () => `${(12 + (i++ % 5) / 10).toFixed(1)}\n`, 250);
  await nav(page, "connect");
  if (await page.locator('[data-testid="disconnect"]').isVisible()) await page.click('[data-testid="disconnect"]');
  await page.click('[data-testid="connect"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
  await nav(page, "quickplot");
  const qp = page.locator('[data-testid="quickplot"]');
  await waitFor("both series", async () => Number(await qp.getAttribute("data-series-count")) === 2, 15000, 200);
  await page.waitForTimeout(2000);
  await page.mouse.move(1, 1);
  const value = (title) => qp.locator(".u-legend tr.u-series", { hasText: title }).locator("td.u-value").innerText();
  for (let k = 0; k < 20; k++) {
    const [slow, fast] = [await value("Slow"), await value("Fast")];
    assert.match(slow, /^12(\.\d+)?$/, `the slow device reads ${JSON.stringify(slow)}`);
    assert.match(fast, /^-?\d/, `the simulator reads ${JSON.stringify(fast)}`);
    await page.waitForTimeout(90);
  }
  stopFeed();
  stopFeed = null;
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await page.close();
});

test("a project built in the editor is saved and reopened", async () => {
  page = await fresh();
  await nav(page, "project");
  await page.click('[data-testid="project-new"]');
  await discardIfAsked(page);
  // A dataset reads a parser slot of a source: add the device first.
  await page.click('[data-testid="add-source"]');
  await nav(page, "connect");
  await page.selectOption('[data-testid="source-type"]', "serial");
  await page.fill('[data-testid="serial-port"]', "/dev/ttyUSB7");
  await page.fill('[data-testid="baud"]', "921600");
  await page.selectOption('[data-testid="parser-kind"]', "delimited");
  await page.click('[data-testid="apply-source"]');
  await page.locator('[data-testid="source-select"] option', { hasText: /ttyUSB7|Serial/ }).first().waitFor({ state: "attached" });
  await nav(page, "project");
  await page.click('[data-testid="add-group"]');
  await page.fill('[data-testid="group-title"]', "Bench rig");
  await page.selectOption('[data-testid="group-widget"]', "multiPlot");
  await page.click('[data-testid="add-group-confirm"]');
  await page.locator('[data-testid="tree-group"]', { hasText: "Bench rig" }).first().click();
  await page.click('[data-testid="add-dataset"]');
  await page.fill('[data-testid="dataset-title"]', "Supply volts");
  await page.fill('[data-testid="dataset-index"]', "2");
  await page.click('[data-testid="add-dataset-confirm"]');
  await page.locator('[data-testid="tree-dataset"]', { hasText: "Supply volts" }).first().waitFor();
  await page.locator('[data-testid="tree-source"]', { hasText: /ttyUSB7|Serial/ }).first().waitFor();
  const path = join(dir, "bench-rig.json");
  // A project without a file: Save asks where, in a dialog of its own (not the Open box).
  await page.click('[data-testid="project-save"]');
  await page.fill('[data-testid="save-as-path"]', path);
  await page.click('[data-testid="save-as-save"]');
  await waitFor("the saved file", () => existsSync(path), 10000);
  await page.screenshot({ path: join(artifacts, "browser-editor-light-en.png") });

  await page.click('[data-testid="project-new"]');

  await discardIfAsked(page);
  await waitFor("an empty tree", async () => (await page.locator('[data-testid="tree-group"]', { hasText: "Bench rig" }).count()) === 0);
  await page.fill('[data-testid="project-path"]', path);
  await page.click('[data-testid="project-open-path"]');
  await discardIfAsked(page);
  await page.locator('[data-testid="tree-group"]', { hasText: "Bench rig" }).first().waitFor();
  await page.locator('[data-testid="tree-dataset"]', { hasText: "Supply volts" }).first().waitFor();
  await page.locator('[data-testid="tree-source"]', { hasText: /ttyUSB7|Serial/ }).first().waitFor();
  await page.close();
});

test("a Serial Studio project picked on this computer imports and its widgets appear", async () => {
  page = await fresh();
  await nav(page, "project");
  // The browser's own file picker: the file's text travels, not a path on the server.
  await pick(page, "project-import", join(repo, "fixtures/serial-studio/multi-source.ssproj"));
  const message = page.locator('[data-testid="editor-message"]');
  await waitFor("the import's message", async () => /^Imported multi-source\.ssproj from Serial Studio/.test(await message.innerText()), 10000);
  assert.equal(await message.getAttribute("data-kind"), "ok");
  assert.doesNotMatch(await message.innerText(), /imported from Serial Studio format/, "the backend's English detail is not shown as is");
  assert.equal(await page.inputValue('[data-testid="project-path"]'), "", "a picked file has no path to save over");
  await nav(page, "dashboard");
  const tiles = page.locator('[data-testid="widget"]');
  await waitFor("imported widgets", async () => (await tiles.count()) >= 2, 10000);
  const titles = await tiles.evaluateAll((ts) => ts.map((t) => t.getAttribute("data-title")));
  const project = await page.evaluate(async () => {
    const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
    return new Promise((resolve) => {
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
        ws.send(JSON.stringify({ type: "command", id: 1, command: "project.get" }));
      };
      ws.onmessage = (e) => JSON.parse(e.data).id === 1 && resolve(JSON.parse(e.data).result);
    });
  });
  const groups = project.groups.map((g) => g.title);
  assert.ok(groups.length > 0, "the import has groups");
  for (const g of groups) assert.ok(titles.includes(g), `a widget for group ${g} (have ${titles})`);
  await page.screenshot({ path: join(artifacts, "browser-import-light-en.png") });
  await page.close();
});

test("an imported Serial Studio project is saved beside the original, never over it", async () => {
  const original = join(dir, "bench.ssproj");
  copyFileSync(join(repo, "fixtures/serial-studio/multi-source.ssproj"), original);
  const before = readFileSync(original);
  const suggested = join(dir, "bench.sextant.json");
  page = await fresh();
  await nav(page, "project");
  // A path on the machine running Sextant, typed: project.open imports a Serial Studio file.
  await page.fill('[data-testid="project-path"]', original);
  await page.click('[data-testid="project-open-path"]');
  await discardIfAsked(page);
  await page.locator('[data-testid="tree-group"]').first().waitFor();
  // Save asks where, suggesting a file beside the original, never over it.
  await page.keyboard.press("Control+s");
  await waitFor("the save suggestion", async () => (await page.inputValue('[data-testid="save-as-path"]')) === suggested);
  await page.click('[data-testid="save-as-save"]');
  await waitFor("the project saved beside the original", () => existsSync(suggested), 10000);
  assert.deepEqual(readFileSync(original), before, "the Serial Studio file was overwritten");
  assert.equal(JSON.parse(readFileSync(suggested, "utf8")).format, "sextant-project");
  await page.close();
});

test("Open… picks a project file on this computer and opens it", async () => {
  const file = join(dir, "picked.sextant.json");
  writeFileSync(file, JSON.stringify({ ...(await import("./harness.mjs")).demoProject(), title: "Picked bench" }));
  page = await fresh();
  await nav(page, "project");
  await page.click('[data-testid="project-new"]');
  await discardIfAsked(page);
  await waitFor("an empty tree", async () => (await page.locator('[data-testid="tree-group"]').count()) === 0);
  await pick(page, "project-open", file);
  await waitFor("the picked project's title", async () => (await page.inputValue('[data-testid="project-title"]')) === "Picked bench", 10000);
  await page.locator('[data-testid="tree-group"]', { hasText: "Environment" }).first().waitFor();
  assert.match(await page.locator('[data-testid="editor-message"]').innerText(), /^Opened picked\.sextant\.json/);
  // Picking the same file again after editing it is a change too: it opens again.
  writeFileSync(file, JSON.stringify({ ...(await import("./harness.mjs")).demoProject(), title: "Picked again" }));
  await pick(page, "project-open", file);
  await waitFor("the re-picked project's title", async () => (await page.inputValue('[data-testid="project-title"]')) === "Picked again", 10000);
  await page.close();
});

test("a Serial Studio project whose parser returns strings shows numbers in its gauge, map and plots", async () => {
  // The shape of most Serial Studio projects (TinyGPS, MPU6050, EM Wave): a JavaScript
  // parser returning frame.split(','), so every value arrives as text.
  const file = join(dir, "rover.ssproj");
  copyFileSync(join(repo, "fixtures/serial-studio/js-csv.ssproj"), file);
  page = await fresh();
  await nav(page, "project");
  await pick(page, "project-import", file);
  await page.locator('[data-testid="tree-group"]', { hasText: "Position" }).first().waitFor();
  await nav(page, "connect");
  await page.fill('[data-testid="serial-port"]', pty.a);
  let i = 0;
  stopFeed = feed(pty.b, () => {
    i++;
    return `$${230 + (i % 10)},40,3.9,${(45.5 + i / 1e5).toFixed(5)},-73.5673,35.2,0.12,-0.05,9.81\n`;
  });
  await page.click('[data-testid="connect"]');
  // Its keep-alive sends on connect and every second: asked once, by what it sends.
  const dialog = page.locator('[data-testid="confirm-dialog"]');
  await dialog.waitFor();
  assert.match(await dialog.innerText(), /“Keep-alive” sends “PING”/);
  await page.click('[data-testid="confirm-yes"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
  await nav(page, "dashboard");
  const ids = await page.evaluate(async () => {
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
  const value = (title) => page.evaluate((id) => window.__sextantValue?.(id), ids[title]);
  await waitFor("numbers from text values", async () => Number.isFinite(await value("Latitude")), 15000, 200);
  // A gauge (through a transform), the map's coordinates and a plotted axis: all numbers.
  const t = await value("Temperature");
  assert.ok(t >= 23 && t <= 24, `Temperature ${t}`);
  assert.ok(Math.abs((await value("Latitude")) - 45.5) < 0.1);
  assert.equal(await value("Longitude"), -73.5673);
  assert.equal(await value("Accel Z"), 9.81);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(artifacts, "browser-ss-strings-light-en.png") });
  stopFeed();
  stopFeed = null;
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await page.close();
});

test("a project file dropped on the window opens", async () => {
  page = await fresh();
  await nav(page, "project");
  const project = { ...(await import("./harness.mjs")).demoProject(), title: "Dropped bench" };
  await page.evaluate((text) => {
    const data = new DataTransfer();
    data.items.add(new File([text], "dropped.json", { type: "application/json" }));
    window.dispatchEvent(new DragEvent("drop", { dataTransfer: data, bubbles: true, cancelable: true }));
  }, JSON.stringify(project));
  await discardIfAsked(page);
  await waitFor("the dropped project's title", async () => (await page.inputValue('[data-testid="project-title"]')) === "Dropped bench", 10000);
  await page.locator('[data-testid="tree-group"]', { hasText: "Environment" }).first().waitFor();
  await page.close();
});

test("a shared project that runs a program asks before it runs, and remembers the yes", async () => {
  const marker = join(dir, "program-ran");
  const file = join(dir, "shared-logger.json");
  writeFileSync(file, JSON.stringify({
    format: "sextant-project", schemaVersion: 1, title: "Shared logger",
    sources: [{ id: "tool", title: "Logger", parser: { kind: "delimited" },
      connection: { type: "process", program: "/bin/sh", args: ["-c", `echo ran > '${marker}'; cat`] } }],
    groups: [{ id: "g", title: "Log", datasets: [{ id: "v", title: "V", index: 1 }] }],
  }));
  page = await fresh();
  await openByPath(page, file);
  await page.locator('[data-testid="tree-source"]', { hasText: "Logger" }).first().waitFor();
  await nav(page, "connect");
  await page.click('[data-testid="connect"]');
  const dialog = page.locator('[data-testid="confirm-dialog"]');
  await dialog.waitFor();
  const question = await dialog.innerText();
  assert.match(question, /\/bin\/sh -c 'echo ran > /, "the dialog names the exact command line");
  await page.screenshot({ path: join(artifacts, "browser-program-consent-light-en.png") });
  await page.click('[data-testid="confirm-no"]');
  await page.locator('[data-testid="connect-error"]').waitFor();
  await page.waitForTimeout(500);
  assert.ok(!existsSync(marker), "the program ran although the person said no");
  await page.click('[data-testid="connect"]');
  await dialog.waitFor();
  await page.click('[data-testid="confirm-yes"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
  await waitFor("the program to run", () => existsSync(marker), 10000);
  await page.click('[data-testid="disconnect"]');
  await page.locator('[data-testid="connection-status"][data-connected="false"]').waitFor();
  // Remembered for this file and command line: connecting again asks nothing.
  await page.click('[data-testid="connect"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
  assert.equal(await dialog.count(), 0, "asked again for a command line already allowed");
  await page.click('[data-testid="disconnect"]');
  await page.locator('[data-testid="connection-status"][data-connected="false"]').waitFor();
  await page.close();
});

/** A mosquitto on `localhost` that takes only `bench` / `password`, over TLS under a CA
 *  made here with openssl: what a lab broker looks like. */
async function lockedBroker(password) {
  for (const [p, pkg] of [["mosquitto", "mosquitto"], ["mosquitto_passwd", "mosquitto"], ["openssl", "openssl"]]) requireProgram(p, pkg);
  // Its own folder, opened to all: mosquitto started as root reads its files as its own user.
  const certs = tempDir("sextant-broker-");
  const sh = (script) => execFileSync("sh", ["-c", script], { cwd: certs, stdio: "ignore" });
  sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=lab-ca");
  sh("openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost");
  writeFileSync(join(certs, "ext.cnf"), "subjectAltName=DNS:localhost\n");
  sh("openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf");
  sh(`mosquitto_passwd -c -b passwd bench '${password}' && chmod 0644 ca.pem server.pem server.key passwd && chmod 0755 .`);
  const port = 18000 + Math.floor(Math.random() * 2000);
  writeFileSync(join(certs, "broker.conf"), [
    "per_listener_settings true", `listener ${port} 127.0.0.1`, "allow_anonymous false",
    `password_file ${certs}/passwd`, `cafile ${certs}/ca.pem`, `certfile ${certs}/server.pem`, `keyfile ${certs}/server.key`, "",
  ].join("\n"));
  const proc = start(`mosquitto-${port}`, "mosquitto", ["-c", join(certs, "broker.conf")]);
  await waitFor("mosquitto listening", () => new Promise((ok) => {
    const s = connect(port, "127.0.0.1", () => (s.end(), ok(true)));
    s.on("error", () => ok(false));
  }), 10000);
  return { port, ca: join(certs, "ca.pem"), stop: proc.stop };
}

test("a broker with a password and a private CA: the wrong password says so, the right one connects, nothing of it in the project", async () => {
  const password = "c0rrect horse";
  const broker = await lockedBroker(password);
  try {
    page = await fresh();
    await nav(page, "project");
    await page.click('[data-testid="project-new"]');
    await discardIfAsked(page);
    await nav(page, "connect");
    await page.selectOption('[data-testid="source-type"]', "mqtt");
    await page.fill('[data-testid="host"]', "localhost");
    await page.fill('[data-testid="net-port"]', String(broker.port));
    await page.fill('[data-testid="mqtt-topic"]', "lab/#");
    await page.fill('[data-testid="mqtt-username"]', "bench");
    await page.check('[data-testid="mqtt-tls"]');
    await page.setInputFiles('[data-testid="cred-ca"]', broker.ca);
    await waitFor("the chosen CA", async () => /ca\.pem – saved when you connect/.test(await page.innerText('[data-testid="cred-ca-state"]')), 5000);
    await page.fill('[data-testid="cred-password"]', "tr0ub4dor");
    await page.click('[data-testid="connect"]');
    const info = page.locator('[data-testid="connect-info"]');
    // A wrong password is not retried, and the message does not say it is.
    await waitFor("the broker's refusal", async () => (await info.getAttribute("data-state")) === "connect.failedInfo", 15000);
    const refusal = await info.innerText();
    assert.match(refusal, /refused the connection: (not authorized|wrong user name or password)/);
    assert.doesNotMatch(refusal, /tr0ub4dor|NotAuthorized|BadUserName|keeps trying/);
    // Saved, never shown again: the field is empty and says a password is kept.
    assert.equal(await page.inputValue('[data-testid="cred-password"]'), "");
    assert.match(await page.getAttribute('[data-testid="cred-password"]', "placeholder"), /saved/);
    assert.equal(await page.innerText('[data-testid="cred-ca-state"]'), "saved");
    await page.locator('[data-testid="credentials"]').scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(artifacts, "browser-connect-credentials-light-en.png") });
    await page.click('[data-testid="disconnect"]');

    // The right password, typed over the saved one: connected.
    await page.fill('[data-testid="cred-password"]', password);
    await page.click('[data-testid="connect"]');
    const sidebar = page.locator('[data-testid="connection-status"]');
    await waitFor("connected to the locked broker", async () => (await sidebar.getAttribute("data-state")) === "connected", 15000);

    // Neither the page's project nor the file saved from it carries a secret.
    const saved = join(dir, "locked-broker.json");
    const project = await page.evaluate(async (path) => {
      const ws = new WebSocket(location.origin.replace("http", "ws") + "/ws");
      await new Promise((r) => (ws.onopen = r));
      const token = sessionStorage.getItem("sextant.serverSecret");
      const ask = (msg) => new Promise((r) => {
        ws.onmessage = (e) => { const v = JSON.parse(e.data); if (v.id === msg.id) r(v); };
        ws.send(JSON.stringify(msg));
      });
      await ask({ type: "auth", id: "a", token });
      await ask({ type: "command", id: 1, command: "project.save", params: { path }, approved: true });
      return (await ask({ type: "command", id: 2, command: "project.get", params: {} })).result;
    }, saved);
    for (const text of [JSON.stringify(project), readFileSync(saved, "utf8")]) {
      assert.doesNotMatch(text, /c0rrect|tr0ub4dor|BEGIN CERTIFICATE/);
    }
    assert.match(readFileSync(saved, "utf8"), /"username": "bench"/);
    await page.click('[data-testid="disconnect"]');
    await page.close();

    // 简体中文, and the project editor's panel for the same source.
    const zh = await fresh(base, { language: "zh" });
    await nav(zh, "connect");
    await zh.locator('[data-testid="cred-where"]').waitFor();
    assert.match(await zh.innerText('[data-testid="credentials"]'), /系统密钥环|加密文件/);
    await zh.locator('[data-testid="credentials"]').scrollIntoViewIfNeeded();
    await zh.screenshot({ path: join(artifacts, "browser-connect-credentials-light-zh.png") });
    await nav(zh, "project");
    await zh.click('[data-testid="tree-source"]');
    const panel = zh.locator('[data-testid="source-credentials"]');
    await panel.waitFor();
    assert.match(await panel.innerText(), /登录与证书/);
    await zh.screenshot({ path: join(artifacts, "browser-project-credentials-light-zh.png") });
    await zh.close();
  } finally {
    broker.stop();
  }
});

test("a database set up on the Project screen: Connect asks first, the password stays out of the project, every value lands in the table", async () => {
  const pg = await postgresServer();
  try {
    page = await fresh();
    await nav(page, "project");
    await page.click('[data-testid="project-new"]');
    await discardIfAsked(page);
    await nav(page, "connect");
    await page.selectOption('[data-testid="source-type"]', "simulator");
    await page.click('[data-testid="apply-source"]');
    await nav(page, "project");
    const panel = page.locator('[data-testid="postgres-panel"]');
    await panel.waitFor();
    await page.check('[data-testid="pg-enabled"]');
    await page.fill('[data-testid="pg-host"]', "127.0.0.1");
    await page.fill('[data-testid="pg-port"]', String(pg.port));
    await page.fill('[data-testid="pg-user"]', pg.user);
    await page.fill('[data-testid="pg-table"]', "bench_values");
    await page.fill('[data-testid="pg-bench"]', "rig-a");
    await page.fill('[data-testid="pg-password"]', pg.password);
    // The source applied just before refreshes the project: the form keeps what was typed.
    assert.ok(await page.isChecked('[data-testid="pg-enabled"]'), "the tick survived the project's refresh");
    await page.click('[data-testid="pg-save"]');
    await page.locator('[data-testid="pg-saved"]').waitFor();
    // Saved, never shown again.
    assert.equal(await page.inputValue('[data-testid="pg-password"]'), "");
    assert.match(await page.getAttribute('[data-testid="pg-password"]', "placeholder"), /saved/);
    await panel.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(artifacts, "browser-project-postgres-light-en.png") });

    // Connect names where every value would go, and waits for a yes.
    await nav(page, "connect");
    await page.click('[data-testid="connect"]');
    const dialog = page.locator('[data-testid="confirm-dialog"]');
    await dialog.waitFor();
    const asked = await dialog.innerText();
    assert.match(asked, new RegExp(`written to the table “bench_values” of the database postgresql://sextant@127\\.0\\.0\\.1:${pg.port}/postgres`));
    assert.doesNotMatch(asked, /postgres\.configure|io\.connect|Outgoing/);
    await page.click('[data-testid="confirm-yes"]');
    await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
    const status = page.locator('[data-testid="postgres-status"]');
    await waitFor("values written", async () => /PostgreSQL: [\d,]+ values from [\d,]+ frames written/.test(await status.innerText().catch(() => "")), 15000);
    await status.scrollIntoViewIfNeeded();
    await page.screenshot({ path: join(artifacts, "browser-connect-postgres-light-en.png") });
    await page.click('[data-testid="disconnect"]');
    await page.locator('[data-testid="connection-status"][data-connected="false"]').waitFor();

    // The table holds the run, under the bench's name; the project holds no password.
    const rows = await waitFor("the rows in the table", () => {
      const r = pg.query("SELECT count(*), count(DISTINCT dataset), min(bench) FROM bench_values");
      return Number(r[0][0]) > 0 ? r[0] : null;
    }, 15000);
    assert.ok(Number(rows[1]) >= 1, `datasets: ${rows}`);
    assert.equal(rows[2], "rig-a");
    const project = await pageCommand(page, "project.get");
    assert.equal(project.postgres.table, "bench_values");
    assert.doesNotMatch(JSON.stringify(project), new RegExp(pg.password));
    await page.close();

    // 简体中文: the same panel, in Chinese.
    const zh = await fresh(base, { language: "zh" });
    await nav(zh, "project");
    const zhPanel = zh.locator('[data-testid="postgres-panel"]');
    await zhPanel.waitFor();
    assert.match(await zhPanel.innerText(), /写入数据库/);
    await zhPanel.scrollIntoViewIfNeeded();
    await zh.screenshot({ path: join(artifacts, "browser-project-postgres-light-zh.png") });
    await zh.close();
  } finally {
    pg.stop();
  }
});

test("a port that does not exist is never shown as connected", async () => {
  page = await fresh();
  await nav(page, "project");
  await page.click('[data-testid="project-new"]');
  await discardIfAsked(page);
  await nav(page, "connect");
  await page.selectOption('[data-testid="source-type"]', "serial");
  await page.fill('[data-testid="serial-port"]', join(dir, "no-such-port"));
  await page.click('[data-testid="connect"]');
  const sidebar = page.locator('[data-testid="connection-status"]');
  const banner = page.locator('[data-testid="connect-state"]');
  await waitFor("the sources' own status", async () => ["reconnecting", "error"].includes(await sidebar.getAttribute("data-state")), 10000);
  assert.equal(await sidebar.getAttribute("data-connected"), "false");
  assert.doesNotMatch(await sidebar.innerText(), /^Connected/);
  await waitFor("the same state on the Connect screen", async () => (await banner.getAttribute("data-state")) === (await sidebar.getAttribute("data-state")), 5000);
  // The message under the buttons says so too: never a green "Connected" with a way to Quick plot.
  const info = page.locator('[data-testid="connect-info"]');
  await waitFor("the connect message", async () => (await info.getAttribute("data-state")) === "connect.notConnectedInfo", 5000);
  assert.match(await info.innerText(), /^Not connected: .+/);
  assert.equal(await page.locator('[data-testid="open-quickplot"]').count(), 0);
  // The dashboard does not tell a person to connect a device that is being connected.
  await nav(page, "dashboard");
  assert.equal(await page.locator('[data-testid="no-data"]').getAttribute("data-state"), "dash.connecting");
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await waitFor("disconnected", async () => (await sidebar.getAttribute("data-state")) === "disconnected");
  await page.close();
});

test("a recording is replayed", async () => {
  page = await fresh();
  await nav(page, "recording");
  await page.fill('[data-testid="sessions-db"]', join(dir, "sessions.sqlite"));
  await page.click('[data-testid="sessions-db-set"]');
  // Record the simulator for a moment.
  await nav(page, "project");
  await page.click('[data-testid="project-new"]');
  await discardIfAsked(page);
  await nav(page, "connect");
  await page.selectOption('[data-testid="source-type"]', "simulator");
  await page.click('[data-testid="connect"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 }).catch(async (e) => { await page.screenshot({ path: join(artifacts, "debug-conn.png") }); throw e; });
  await nav(page, "recording");
  await page.click('[data-testid="start-recording"]');
  await page.waitForTimeout(3000);
  await page.click('[data-testid="stop-recording"]');
  const row = page.locator('[data-testid="session-row"]').first();
  await row.waitFor();
  // Export in a browser is a download in the format picked, named after the session: the
  // CSV counts from its first frame; MCAP and Parquet are whole files of their kind.
  const downloaded = {};
  for (const format of ["csv", "mcap", "parquet"]) {
    await row.locator('[data-testid="session-export"]').click();
    assert.equal(await row.locator('[data-testid="session-export-path"]').count(), 0, "a page asks for no path");
    await row.locator('[data-testid="session-export-format"]').selectOption(format);
    const [download] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), row.locator('[data-testid="session-export-confirm"]').click()]);
    assert.match(download.suggestedFilename(), new RegExp(`\\.${format}$`));
    downloaded[format] = readFileSync(await download.path());
  }
  const csvText = downloaded.csv.toString("utf8");
  assert.match(csvText, /^elapsed_s,/);
  assert.match(csvText.split("\n")[1], /^0\.000000,/);
  const mcapMagic = Buffer.from("\x89MCAP0\r\n", "latin1");
  assert.ok(downloaded.mcap.subarray(0, 8).equals(mcapMagic) && downloaded.mcap.subarray(-8).equals(mcapMagic), "a whole MCAP file, magic at both ends");
  assert.equal(downloaded.parquet.subarray(0, 4).toString("latin1"), "PAR1");
  assert.equal(downloaded.parquet.subarray(-4).toString("latin1"), "PAR1", "a whole Parquet file, footer included");
  // The live simulator stays connected: the replay takes its place, and gives it back.
  const sidebar = page.locator('[data-testid="connection-status"]');
  // The replay drives the dashboard: display frames with new data arrive while it plays.
  await page.locator('[data-testid="session-row"]').first().locator('[data-testid="session-replay"]').click();
  await page.locator('[data-testid="replay-pause"]').waitFor();
  await nav(page, "dashboard");
  const frames = () => page.evaluate(() => window.__sextantStats?.framesReceived ?? 0);
  const f0 = await waitFor("the dashboard's display stream", () => page.evaluate(() => window.__sextantStats && window.__sextantStats.framesReceived + 1));
  await waitFor("replayed frames", async () => (await frames()) > f0 + 5, 15000, 100);
  await nav(page, "recording");
  await page.screenshot({ path: join(artifacts, "browser-recording-light-en.png") });
  // It plays to its end and holds there; Play starts it again and it moves.
  const state = page.locator('[data-testid="replay-state"]');
  const controls = page.locator('[data-testid="replay-controls"]');
  await waitFor("the replay's end", async () => (await state.getAttribute("data-state")) === "finished", 20000);
  const duration = Number(await controls.getAttribute("data-duration"));
  assert.ok(duration > 2, `a 3 s recording lasts about that: ${duration}`);
  await page.click('[data-testid="replay-play"]');
  await waitFor("playing again", async () => (await state.getAttribute("data-state")) === "playing", 5000);
  await waitFor("the position moving from the start", async () => {
    const at = Number(await controls.getAttribute("data-position"));
    return at > 0.3 && at < duration - 0.3;
  }, 10000);
  // Stopping it brings the live source back.
  await page.click('[data-testid="replay-stop"]');
  await controls.waitFor({ state: "detached", timeout: 5000 });
  await waitFor("the live simulator connected again", async () => (await sidebar.getAttribute("data-state")) === "connected", 10000);
  // Leave the app as found: nothing connected into the next test.
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await waitFor("disconnected", async () => (await sidebar.getAttribute("data-state")) === "disconnected", 10000);
  await page.close();
});

test("a disk that fills up while recording and exporting says so, in English and 简体中文, and recording resumes", async () => {
  // A real filesystem that runs out of space: a small tmpfs (CI runs as root).
  const disk = join(dir, "small-disk");
  execFileSync("mkdir", ["-p", disk]);
  execFileSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", disk]);
  try {
    page = await fresh();
    await nav(page, "recording");
    await page.fill('[data-testid="sessions-db"]', join(disk, "sessions.sqlite"));
    await page.click('[data-testid="sessions-db-set"]');
    // The screen says which file it records into once the app has opened it; recording
    // before that would go to the file before.
    await shown(page, page.locator('[data-screen="recording"] .hint').filter({ hasText: join(disk, "sessions.sqlite") }), 10000);
    await page.fill('[data-testid="csv-export-path"]', join(disk, "live.csv"));
    await page.click('[data-testid="csv-export-toggle"]');
    await page.fill('[data-testid="mcap-export-path"]', join(disk, "live.mcap"));
    await page.click('[data-testid="mcap-export-toggle"]');
    await nav(page, "project");
    await page.click('[data-testid="project-new"]');
    await discardIfAsked(page);
    await nav(page, "connect");
    await page.selectOption('[data-testid="source-type"]', "simulator");
    await page.click('[data-testid="connect"]');
    await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
    await nav(page, "recording");
    await page.click('[data-testid="start-recording"]');
    await page.locator('[data-testid="recording-live"]').waitFor();
    await page.waitForTimeout(500);
    // Fill the disk, and keep it full: a writer that fails removes its unfinished file, and
    // the space that frees would let another go on writing (rightly: it is saving then).
    const fillers = [];
    const fill = () => {
      const filler = join(disk, `filler-${fillers.length}`);
      fillers.push(filler);
      try {
        execFileSync("dd", ["if=/dev/zero", `of=${filler}`, "bs=4k"], { stdio: "ignore" });
      } catch {
        // dd ends with "No space left on device": that is the point.
      }
    };
    const whileFull = (locator, timeoutMs) => waitFor(`${locator} on a full disk`, async () => (fill(), locator.isVisible()), timeoutMs, 250);
    fill();
    const problem = page.locator('[data-testid="recording-problem"]');
    await whileFull(problem, 15000);
    const said = await problem.innerText();
    assert.match(said, /^Recording is not being saved: the disk is full/);
    const csv = page.locator('[data-testid="csv-export-problem"]');
    await whileFull(csv, 30000);
    assert.match(await csv.innerText(), /^The CSV export stopped: the disk is full/);
    const mcap = page.locator('[data-testid="mcap-export-problem"]');
    await whileFull(mcap, 30000);
    assert.match(await mcap.innerText(), /^The MCAP recording stopped: the disk is full/);
    await page.screenshot({ path: join(artifacts, "browser-disk-full-light-en.png") });
    // The same in 简体中文, with no internal word of either message.
    const zh = await fresh(base, { language: "zh" });
    await nav(zh, "recording");
    await zh.locator('[data-testid="recording-problem"]').waitFor({ timeout: 15000 });
    assert.match(await zh.locator('[data-testid="recording-problem"]').innerText(), /磁盘已满/);
    assert.match(await zh.locator('[data-testid="csv-export-problem"]').innerText(), /磁盘已满/);
    assert.match(await zh.locator('[data-testid="mcap-export-problem"]').innerText(), /磁盘已满/);
    for (const text of [said, await csv.innerText(), await mcap.innerText(), await zh.locator(".screen").innerText()]) {
      assert.doesNotMatch(text, /diskFull|os error|SQLITE|WriteProblem/);
    }
    await zh.context().close();
    // Space comes back: the recording saves again by itself and the warning goes.
    for (const filler of fillers) rmSync(filler, { force: true });
    await problem.waitFor({ state: "detached", timeout: 15000 });
    await page.click('[data-testid="stop-recording"]');
    await page.locator('[data-testid="session-row"]').first().waitFor();
    await nav(page, "connect");
    await page.click('[data-testid="disconnect"]');
    await waitFor("disconnected", async () => (await page.locator('[data-testid="connection-status"]').getAttribute("data-state")) === "disconnected", 10000);
    // Leave the app as found: the export off, the sessions back on the real disk.
    await nav(page, "recording");
    await page.click('[data-testid="csv-export-toggle"]');
    await page.click('[data-testid="mcap-export-toggle"]');
    await page.fill('[data-testid="sessions-db"]', join(dir, "sessions.sqlite"));
    await page.click('[data-testid="sessions-db-set"]');
    await page.close();
  } finally {
    try {
      execFileSync("umount", ["-l", disk]);
    } catch {
      // Already gone.
    }
  }
});

/** In-page: whether two DOMRects overlap. */
const overlaps = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

test("an alarm hovering at its threshold toasts once, in a corner that covers no controls", async () => {
  // The demo's temperature, sped up to cross its warning threshold (27 °C) every second,
  // with noise on it: the old dashboard toasted on every crossing.
  const project = (await import("./harness.mjs")).demoProject();
  const sim = project.sources[0].connection;
  Object.assign(sim.channels[0], { frequencyHz: 1, amplitude: 4, offset: 24, noise: 0.3 });
  const file = join(dir, "hovering-alarm.json");
  writeFileSync(file, JSON.stringify({ ...project, title: "Hovering alarm" }));
  page = await fresh();
  await openByPath(page, file);
  await page.locator('[data-testid="tree-group"]', { hasText: "Environment" }).first().waitFor();
  await nav(page, "dashboard");
  await page.evaluate(() => {
    window.__toastsSeen = 0;
    new MutationObserver((changes) => {
      for (const c of changes) for (const n of c.addedNodes) if (n.nodeType === 1 && n.matches('[data-testid="toast"]')) window.__toastsSeen++;
    }).observe(document.body, { childList: true, subtree: true });
  });
  await nav(page, "connect");
  // Whatever ran before (a replay) stops first: the simulator of this project runs alone.
  if (await page.locator('[data-testid="disconnect"]').isVisible()) await page.click('[data-testid="disconnect"]');
  await page.click('[data-testid="connect"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
  await nav(page, "dashboard");
  const toast = page.locator('[data-testid="toast"]', { hasText: "Temperature" });
  await toast.first().waitFor({ timeout: 10000 });
  // Six more crossings of the threshold.
  await page.waitForTimeout(6000);
  assert.equal(await page.evaluate(() => window.__toastsSeen), 1, "one toast for one alarm episode");

  // The corner it sits in covers none of the dashboard's fixed controls, with the console
  // docked at the bottom or not.
  const clash = () => page.evaluate(() => {
    const t = document.querySelector('[data-testid="toast"]').getBoundingClientRect();
    const controls = document.querySelectorAll(".dash .top button, .dash .top select, .sidebar button, .console-panel button, .console-panel input, .console-panel select, .console-panel textarea");
    return [...controls].filter((c) => {
      const r = c.getBoundingClientRect();
      return r.width > 0 && t.x < r.x + r.width && r.x < t.x + t.width && t.y < r.y + r.height && r.y < t.y + t.height;
    }).map((c) => c.outerHTML.slice(0, 80));
  });
  assert.deepEqual(await clash(), []);
  await page.click('[data-testid="open-console"]');
  await page.locator(".console-panel").waitFor();
  assert.deepEqual(await clash(), []);
  const [t, consoleBox] = await Promise.all([toast.first().boundingBox(), page.locator(".console-panel").boundingBox()]);
  assert.ok(!overlaps(t, consoleBox), "the toast covers the docked console");
  await page.screenshot({ path: join(artifacts, "browser-alarm-toast-light-en.png") });
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await page.close();
});

test("plots ask for what they can show: two points a pixel on screen, nothing off screen or in a hidden page", async () => {
  // Eight plots stacked full width: at 800 px high most are below the fold. The points
  // setting says 10 000; a plot about 1 100 px wide can show no more than ~2 200.
  const project = (await import("./harness.mjs")).demoProject();
  const channels = Array.from({ length: 8 }, (_, i) => ({ name: `ch${i + 1}`, waveform: "sine", frequencyHz: 1 + i, amplitude: 1, offset: i, noise: 0.05 }));
  project.sources = [{ ...project.sources[0], connection: { type: "simulator", frameRateHz: 2000, channels, gps: false, imu: false, seed: 5 } }];
  project.groups = [{ id: "grp-1", title: "Channels", widget: "none", datasets: channels.map((c, i) => ({ id: `ds-${i + 1}`, title: c.name, units: "", index: i + 1, graph: true })) }];
  project.workspaces = [{ id: "ws-1", title: "Stack", tiles: channels.map((_, i) => ({ dataset: `ds-${i + 1}`, x: 0, y: i * 3, w: 12, h: 3 })) }];
  project.actions = [];
  const file = join(dir, "stacked-plots.json");
  writeFileSync(file, JSON.stringify({ ...project, title: "Stacked plots" }));
  page = await fresh(base, { points: 10000 });
  // What the page asks the backend for, as it goes on the wire.
  await page.evaluate(() => {
    window.__display = [];
    const send = WebSocket.prototype.send;
    WebSocket.prototype.send = function (d) {
      if (typeof d === "string" && d.includes('"type":"display"')) window.__display.push(JSON.parse(d));
      return send.call(this, d);
    };
  });
  await openByPath(page, file);
  await page.locator('[data-testid="tree-group"]', { hasText: "Channels" }).first().waitFor();
  await nav(page, "connect");
  if (await page.locator('[data-testid="disconnect"]').isVisible()) await page.click('[data-testid="disconnect"]');
  await page.click('[data-testid="connect"]');
  await page.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 8000 });
  await nav(page, "dashboard");
  const tiles = page.locator('[data-testid="widget"]');
  await waitFor("eight plots", async () => (await tiles.count()) === 8);
  const last = () => page.evaluate(() => window.__display.at(-1));
  // Which tiles are on screen, and the widest plot area in device pixels.
  const onScreen = () => page.evaluate(() => [...document.querySelectorAll('[data-testid="widget"]')].map((t) => {
    const r = t.getBoundingClientRect();
    return r.bottom > 0 && r.top < innerHeight;
  }));
  const canvasWidth = await page.evaluate(() => Math.max(...[...document.querySelectorAll('[data-testid="widget"] canvas')].map((c) => c.width)));
  const asked = async () => {
    const m = await last();
    return Object.values(m.windows);
  };
  await waitFor("windows asked for the plots on screen only", async () => {
    const [w, seen] = [await asked(), await onScreen()];
    return w.length === 8 && w.filter((n) => n > 0).length === seen.filter(Boolean).length;
  }, 10000, 200);
  const shown = (await onScreen()).filter(Boolean).length;
  assert.ok(shown >= 1 && shown < 8, `${shown} of 8 tiles on screen`);
  for (const n of await asked()) assert.ok(n === 0 || (n >= 2 * canvasWidth * 0.8 && n <= 2 * canvasWidth + 256), `${n} points for a ${canvasWidth}-pixel plot`);
  assert.ok(Math.max(...(await asked())) < 10000, "fewer than the points setting");
  assert.equal((await last()).console, false, "no console shown: no console bytes");

  // An off-screen plot draws nothing; an on-screen one moves.
  const look = (i) => page.evaluate((i) => {
    const c = document.querySelectorAll('[data-testid="widget"] canvas')[i];
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let h = 0;
    for (let k = 0; k < d.length; k += 4) h = (Math.imul(h, 31) + d[k] + d[k + 3]) | 0;
    return h;
  }, i);
  const [top0, bottom0] = [await look(0), await look(7)];
  await sleep(1000);
  assert.notEqual(await look(0), top0, "the plot on screen moves");
  assert.equal(await look(7), bottom0, "the plot below the fold is not drawn");
  // Scrolled into view, it asks for its window and draws.
  await tiles.nth(7).scrollIntoViewIfNeeded();
  await waitFor("the last plot's window asked for", async () => (await onScreen())[7] && (await asked()).filter((n) => n > 0).length === (await onScreen()).filter(Boolean).length, 10000, 200);
  const b1 = await look(7);
  await waitFor("the last plot drawing", async () => (await look(7)) !== b1, 5000, 200);

  // A hidden page (a background tab, a minimised window) asks for no window at all.
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await waitFor("no windows while hidden", async () => (await asked()).every((n) => n === 0), 5000, 100);
  await page.evaluate(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" });
    document.dispatchEvent(new Event("visibilitychange"));
  });
  await waitFor("windows again when shown", async () => (await asked()).some((n) => n > 0), 5000, 100);

  // The console, opened, gets the device's bytes; closed, not.
  await page.click('[data-testid="open-console"]');
  await waitFor("console bytes asked for", async () => (await last()).console === true, 5000, 100);
  await page.locator(".console-panel pre").filter({ hasText: "," }).waitFor({ timeout: 8000 });
  await page.click('[data-testid="open-console"]');
  await waitFor("console bytes no longer asked for", async () => (await last()).console === false, 5000, 100);
  await nav(page, "connect");
  await page.click('[data-testid="disconnect"]');
  await page.close();
});

test("at 1024 px with the assistant open, tiles reflow wide enough to read, legends whole", async () => {
  const demo = await serve(["--demo"]);
  try {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    await context.addInitScript(() => localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en" })));
    const p = await context.newPage();
    await p.goto(demo.url);
    await p.waitForSelector(".shell");
    await p.click('[data-testid="chat-toggle"]');
    await p.locator('[data-testid="chat-panel"]').waitFor();
    const power = p.locator('[data-testid="widget"][data-title="Power"]');
    await waitFor("the Power plot's legend values", async () => (await power.locator(".u-legend tr.u-series").count()) === 4 && /\d/.test(await power.locator(".u-legend").innerText()), 15000, 200);
    await p.waitForTimeout(500);
    const tiles = await p.locator('[data-testid="widget"]').evaluateAll((ts) => ts.map((t) => {
      const title = t.querySelector(".title");
      return { title: t.dataset.title, width: t.getBoundingClientRect().width, cut: title.scrollWidth > title.clientWidth };
    }));
    assert.ok(tiles.length >= 5, `tiles: ${JSON.stringify(tiles)}`);
    for (const tile of tiles) {
      assert.ok(tile.width >= 200, `${tile.title} is ${tile.width} px wide`);
      assert.equal(tile.cut, false, `the title of ${tile.title} is cut`);
    }
    assert.ok(await p.locator('[data-testid="reflowed"]').isVisible(), "the dashboard says why its tiles moved");
    // Every legend entry of the multiplot is inside its plot box (which clips), none hidden.
    const entries = await power.evaluate((tile) => {
      const box = tile.querySelector(".plotbox").getBoundingClientRect();
      return [...tile.querySelectorAll(".u-legend tr.u-series")].map((tr) => {
        const r = tr.getBoundingClientRect();
        return { text: tr.innerText.replace(/\s+/g, " ").trim(), inside: r.height > 0 && r.top >= box.top - 0.5 && r.bottom <= box.bottom + 0.5 && r.left >= box.left - 0.5 && r.right <= box.right + 0.5 };
      });
    });
    for (const e of entries) assert.ok(e.inside, `legend entry "${e.text}" is clipped`);
    assert.ok(entries.some((e) => /^Voltage \(V\):? ?-?\d/.test(e.text)), JSON.stringify(entries));
    await p.screenshot({ path: join(artifacts, "browser-narrow-1024-drawer-light-en.png") });
    // The drawer as wide as it goes: one narrow column, the legend on more lines, still whole.
    await p.focus('[data-testid="chat-panel"] [role="separator"]');
    for (let i = 0; i < 10; i++) await p.keyboard.press("Shift+ArrowLeft");
    await p.waitForTimeout(800);
    const narrow = await power.evaluate((tile) => {
      const box = tile.querySelector(".plotbox").getBoundingClientRect();
      const rows = [...tile.querySelectorAll(".u-legend tr.u-series")].map((tr) => tr.getBoundingClientRect());
      return { width: tile.getBoundingClientRect().width, lines: new Set(rows.map((r) => Math.round(r.top))).size, clipped: rows.filter((r) => r.bottom > box.bottom + 0.5 || r.right > box.right + 0.5).length };
    });
    assert.ok(narrow.lines >= 3, `the legend wraps (${JSON.stringify(narrow)})`);
    assert.equal(narrow.clipped, 0, `legend entries cut off in a ${narrow.width} px tile`);
    // With room again, the person's own layout is back (and editable).
    await p.click('[data-testid="chat-close"]');
    await p.setViewportSize({ width: 1400, height: 800 });
    await waitFor("the full layout", async () => (await p.locator(".dash-grid").getAttribute("data-columns")) === "12", 5000);
    assert.equal(await p.locator('[data-testid="reflowed"]').count(), 0);
    await context.close();
  } finally {
    demo.stop();
  }
});

/** In-page: the options of the selects matching `css` whose text does not fit the closed
 *  select (a probe with the select's font and text room: scrollWidth > clientWidth). */
const CLIPPED_OPTIONS = (css) => {
  const out = [];
  for (const sel of document.querySelectorAll(css)) {
    const cs = getComputedStyle(sel);
    // The text's room: the select's width less its padding and the dropdown arrow.
    const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 20;
    const probe = document.createElement("span");
    probe.style.cssText = `position:absolute;visibility:hidden;display:block;white-space:nowrap;overflow:hidden;font:${cs.font};letter-spacing:${cs.letterSpacing};width:${room}px`;
    document.body.append(probe);
    for (const o of sel.options) {
      probe.textContent = o.text;
      if (probe.scrollWidth > probe.clientWidth) out.push(`${sel.dataset.testid}: "${o.text}" needs ${probe.scrollWidth} px of ${Math.round(room)}`);
    }
    probe.remove();
  }
  return out;
};

test("the Connect screen's choices read whole, in both languages, at 1024 px", async () => {
  for (const language of ["en", "zh"]) {
    const context = await browser.newContext({ viewport: { width: 1024, height: 768 } });
    await context.addInitScript((l) => localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: l })), language);
    const p = await context.newPage();
    await p.goto(base);
    await p.waitForSelector(".shell");
    await nav(p, "connect");
    assert.deepEqual(await p.evaluate(CLIPPED_OPTIONS, '[data-testid="parser-kind"], [data-testid="source-type"]'), [], language);
    // What the chosen parser does is said beside it, in full.
    await p.selectOption('[data-testid="parser-kind"]', "quickPlot");
    const desc = p.locator('[data-testid="parser-kind-desc"]');
    assert.match(await desc.innerText(), language === "en" ? /comma-separated/ : /逗号/);
    assert.ok(await desc.evaluate((e) => e.scrollWidth <= e.clientWidth && e.scrollHeight <= e.clientHeight + 1), "the description is cut");
    await p.screenshot({ path: join(artifacts, `browser-connect-1024-light-${language}.png`) });
    await context.close();
  }
});

test("every screen in light/dark and English/简体中文", async () => {
  const demo = await serve(["--demo"]);
  try {
    for (const theme of ["light", "dark"]) {
      for (const language of ["en", "zh"]) {
        const p = await fresh(demo.url, { theme, language });
        assert.equal(await p.evaluate(() => document.documentElement.dataset.theme), theme);
        for (const screen of ["dashboard", "connect", "quickplot", "project", "recording", "settings"]) {
          await nav(p, screen);
          await p.waitForTimeout(screen === "dashboard" ? 1200 : 300);
          await p.screenshot({ path: join(artifacts, `screen-${screen}-${theme}-${language}.png`) });
        }
        const label = await p.textContent('[data-nav="dashboard"]');
        assert.equal(label.trim(), language === "zh" ? "仪表盘" : "Dashboard");
        // The assistant's drawer beside the dashboard, and its settings.
        await nav(p, "dashboard");
        await p.click('[data-testid="chat-toggle"]');
        await p.locator('[data-testid="chat-panel"]').waitFor();
        await p.screenshot({ path: join(artifacts, `screen-assistant-${theme}-${language}.png`) });
        await p.click('[data-testid="chat-settings"]');
        await p.locator('[data-testid="chat-base-url"]').waitFor();
        await p.screenshot({ path: join(artifacts, `screen-assistant-settings-${theme}-${language}.png`) });
        const toggle = await p.textContent('[data-testid="chat-toggle"]');
        assert.equal(toggle.trim(), language === "zh" ? "助手" : "Assistant");
        await p.close();
      }
    }
    // The language switch in Settings changes the running UI.
    const p = await fresh(demo.url);
    await nav(p, "settings");
    await p.selectOption('[data-testid="language"]', "zh");
    await waitFor("Chinese labels", async () => (await p.textContent('[data-nav="dashboard"]')).trim() === "仪表盘", 5000);
    await p.close();
  } finally {
    demo.stop();
  }
});
