// Painter widgets, fed by the simulator: a group's own JavaScript draws its tile in a
// sandboxed worker. A painter in Sextant's form (paint(ctx, datasets, w, h)) and one in
// Serial Studio's (paint(ctx, w, h) with a global `datasets`, onFrame, measureTextWidth)
// draw and keep drawing; one that throws shows its error and line on the tile; one that
// loops forever is stopped; one that reaches for the network finds nothing there – and
// the rest of the dashboard keeps updating throughout. Screenshots in light and dark. Runs
// against `sextant serve` in Chromium; the UI it serves is ui/dist, or $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, demoProject, servedProject, tempDir, waitFor } from "./harness.mjs";

let stage, browser, dir, url;

const BARS = `// Sextant's form.
function paint(ctx, datasets, w, h) {
  ctx.fillStyle = theme.widget_base;
  ctx.fillRect(0, 0, w, h);
  datasets.forEach((d, i) => {
    const f = Math.max(0, Math.min(1, (d.value - d.min) / (d.max - d.min)));
    ctx.fillStyle = theme.widget_colors[i];
    ctx.fillRect(10 + i * 60, h - f * (h - 20), 50, f * (h - 20));
  });
  ctx.fillStyle = theme.widget_text;
  ctx.fillText(datasets[0].title + " " + datasets[0].value.toFixed(2), 10, 14);
}`;
const SERIAL_STUDIO = `// Serial Studio's form: a global datasets, onFrame, measureTextWidth.
const trace = [];
function onFrame() {
  trace.push(datasets[0].value);
  if (trace.length > 100) trace.shift();
}
function paint(ctx, w, h) {
  ctx.fillStyle = "#06140a";
  ctx.fillRect(0, 0, w, h);
  ctx.strokeStyle = "#22c55e";
  ctx.beginPath();
  trace.forEach((v, i) => (i ? ctx.lineTo : ctx.moveTo).call(ctx, (i / 99) * w, h / 2 - v * h * 0.2));
  ctx.stroke();
  ctx.fillStyle = "#fff";
  ctx.fillText("frame " + frame.number, w - 10 - ctx.measureTextWidth("frame " + frame.number), 14);
}`;
const THROWS = `function paint(ctx, datasets, w, h) {
  ctx.fillRect(0, 0, w, h);
  undefinedThing.draw();
}`;
const LOOPS = `function paint(ctx, datasets, w, h) {
  while (true) {}
}`;
const NETWORK = `function paint(ctx, datasets, w, h) {
  fetch("http://127.0.0.1:9/steal");
}`;

before(async () => {
  dir = tempDir("sextant-painter-");
  const project = demoProject();
  const channels = [
    { name: "A", waveform: "sine", frequencyHz: 0.5, amplitude: 1, offset: 0, noise: 0 },
    { name: "B", waveform: "saw", frequencyHz: 0.3, amplitude: 1, offset: 0, noise: 0 },
  ];
  project.sources = [{ ...project.sources[0], connection: { type: "simulator", frameRateHz: 100, channels, gps: false, imu: false, seed: 1 } }];
  const ds = (g) => [
    { id: `${g}-a`, title: "A", units: "V", index: 1, min: -1, max: 1, graph: false },
    { id: `${g}-b`, title: "B", units: "V", index: 2, min: -1, max: 1, graph: false },
  ];
  const painter = (id, title, code) => ({ id, title, widget: "painter", datasets: ds(id), painterCode: code });
  project.groups = [
    painter("bars", "Bars", BARS),
    painter("ss", "Serial Studio", SERIAL_STUDIO),
    painter("throws", "Throws", THROWS),
    painter("loops", "Loops", LOOPS),
    painter("network", "Network", NETWORK),
    { id: "plain", title: "Plain", widget: "none", datasets: [{ id: "plot-a", title: "Plot A", units: "V", index: 1, graph: true }] },
  ];
  project.workspaces = [{ id: "ws", title: "Painters", tiles: [
    { group: "bars", x: 0, y: 0, w: 4, h: 3 },
    { group: "ss", x: 4, y: 0, w: 4, h: 3 },
    { dataset: "plot-a", view: "plot", x: 8, y: 0, w: 4, h: 3 },
    { group: "throws", x: 0, y: 3, w: 4, h: 3 },
    { group: "loops", x: 4, y: 3, w: 4, h: 3 },
    { group: "network", x: 8, y: 3, w: 4, h: 3 },
  ] }];
  project.actions = [];
  stage = await servedProject(dir, "painters", { ...project, title: "Painters" });
  ({ url, browser } = stage);
});

after(async () => {
  await stage?.stop();
});

const painter = (p, title) => p.locator(`[data-testid="widget"][data-title="${title}"] [data-testid="painter"]`);
const frames = async (loc) => Number(await loc.getAttribute("data-frames"));

for (const theme of ["light", "dark"]) {
  test(`painters draw, a broken one says why, and the dashboard goes on (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme, settings: { refreshHz: 30 }, viewport: { width: 1280, height: 800 } });
    const bars = painter(p, "Bars"), ss = painter(p, "Serial Studio");
    await bars.waitFor({ timeout: 10000 });
    for (const loc of [bars, ss]) {
      await waitFor("a painter drawing", async () => (await frames(loc)) >= 10, 15000, 100);
      assert.equal(await loc.getAttribute("data-state"), "running");
    }
    // It keeps drawing what the data says: two pictures a second apart differ.
    const first = await bars.screenshot();
    await p.waitForTimeout(1000);
    assert.notDeepEqual(await bars.screenshot(), first, "the bars moved with the sine");

    // An error: shown on the tile with its line, in words.
    const throws = painter(p, "Throws");
    await waitFor("the error", async () => (await throws.getAttribute("data-state")) === "error", 10000, 100);
    assert.equal(await throws.getAttribute("data-line"), "3");
    assert.match(await throws.locator('[data-testid="painter-error"]').innerText(), /(Line|第) 3.*undefinedThing/s);

    // A loop that never returns: the worker is ended and the tile says so.
    const loops = painter(p, "Loops");
    await waitFor("the loop stopped", async () => (await loops.getAttribute("data-state")) === "stopped", 10000, 100);
    assert.match(await loops.locator('[data-testid="painter-error"]').innerText(), /1000/);

    // The network is not there.
    const network = painter(p, "Network");
    await waitFor("no network", async () => (await network.getAttribute("data-state")) === "error", 10000, 100);
    assert.match(await network.locator('[data-testid="painter-error"]').innerText(), /fetch/);

    // The rest of the dashboard kept going, and so do the good painters.
    const stats = () => p.evaluate(() => window.__sextantStats.drawnFrames);
    const drawn = await stats(), good = await frames(bars);
    await waitFor("the dashboard still draws", async () => (await stats()) > drawn + 10, 10000, 100);
    assert.ok((await frames(bars)) > good, "the good painter still draws");

    await p.locator('[data-testid="widget"][data-title="Bars"]').screenshot({ path: join(artifacts, `widgets-painter-${theme}.png`) });
    await p.screenshot({ path: join(artifacts, `widgets-painter-dashboard-${theme}.png`) });
    await context.close();
  });
}
