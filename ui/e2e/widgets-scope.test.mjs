// A plot like an oscilloscope. The simulator sends a 2 Hz square wave, a sine riding at
// +5 and a saw; their plots are set, through the tile menu and the project, to:
// - a single trigger on the square's rising edge (set in the tile menu): the window holds on
//   that edge – with the pre-trigger share before it – and stays while the data moves on,
//   until Arm takes the next edge;
// - an auto trigger: each new window is a whole number of periods after the last (a stable
//   waveform), and a sine's peak hold reads its lowest and highest values;
// - a log y axis over whole decades, steps, stems and dots.
// Screenshots of each in light and dark. Runs against `sextant serve` in Chromium like
// tile-menu.test.mjs; the UI it serves is ui/dist, or $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, demoProject, servedProject, tempDir, waitFor } from "./harness.mjs";

const PERIOD = 0.5; // the square wave's, s
const RANGE_S = 4; // the dashboard's time range: a triggered plot shows half of it
let stage, browser, dir, url;

before(async () => {
  dir = tempDir("sextant-scope-");
  const project = demoProject();
  const channels = [
    { name: "Square", waveform: "square", frequencyHz: 1 / PERIOD, amplitude: 1, offset: 0, noise: 0 },
    { name: "Square auto", waveform: "square", frequencyHz: 1 / PERIOD, amplitude: 1, offset: 0, noise: 0 },
    { name: "Sine", waveform: "sine", frequencyHz: 1, amplitude: 2, offset: 5, noise: 0 },
    { name: "Saw", waveform: "saw", frequencyHz: 1, amplitude: 1, offset: 0, noise: 0 },
  ];
  project.sources = [{ ...project.sources[0], connection: { type: "simulator", frameRateHz: 100, channels, gps: false, imu: false, seed: 1 } }];
  const ds = (i, title, extra = {}) => ({ id: `ds-${i}`, title, units: "", index: i, graph: true, ...extra });
  project.groups = [{
    id: "grp-1", title: "Scope", widget: "none", datasets: [
      ds(1, "Square"),
      ds(2, "Square auto", { trigger: { level: 0, edge: "rising", preTrigger: 0.5, mode: "auto" } }),
      ds(3, "Sine log", { log: true, interpolation: "step", peakHold: true }),
      ds(4, "Saw stems", { interpolation: "stem" }),
      ds(5, "Sine dots", { index: 3, interpolation: "none" }),
    ],
  }];
  project.workspaces = [{
    id: "ws-1", title: "Scope", tiles: project.groups[0].datasets.map((d, i) => ({ group: null, dataset: d.id, view: "plot", x: (i % 2) * 6, y: Math.floor(i / 2) * 3, w: 6, h: 3 })),
  }];
  project.actions = [];
  stage = await servedProject(dir, "scope", { ...project, title: "Scope" });
  ({ url, browser } = stage);
});

after(async () => {
  await stage?.stop();
});

const dashboard = (theme) =>
  connectedDashboard(browser, url, { theme, settings: { timeRangeS: RANGE_S, refreshHz: 30 }, viewport: { width: 1280, height: 900 } });

const tileOf = (p, title) => p.locator(`[data-testid="widget"][data-widget-kind="plot"][data-title="${title}"]`);
const attr = (tile, name) => tile.locator(".plotbox").getAttribute(name);
const range = (text) => (text ? text.split(",").map(Number) : null);

for (const theme of ["light", "dark"]) {
  test(`a single trigger holds the square wave on its rising edge until armed again (${theme})`, async () => {
    const { context, p } = await dashboard(theme);
    const tile = tileOf(p, "Square");
    await tile.waitFor({ timeout: 10000 });
    // The tile menu sets the trigger: single, rising through 0, a quarter of the window before.
    await tile.locator(".plotbox").waitFor();
    if ((await tile.locator('[data-testid="plot-trigger"]').count()) === 0) {
      await tile.locator('[data-testid="tile-menu-button"]').click();
      await tile.locator('[data-testid="tile-trigger"]').selectOption("single");
      await tile.locator('[data-testid="tile-trigger-level"]').fill("0");
      await tile.locator('[data-testid="tile-trigger-pre"]').fill("25");
      await tile.locator('[data-testid="tile-menu-apply"]').click();
      await tile.locator('[data-testid="tile-menu"]').waitFor({ state: "detached" });
    }
    const state = tile.locator('[data-testid="plot-trigger"]');
    await waitFor("the first edge held", async () => (await state.getAttribute("data-state")) === "triggered", 15000, 100);
    const at = Number(await attr(tile, "data-trigger-at"));
    const [x0, x1] = range(await attr(tile, "data-x-range"));
    const span = RANGE_S / 2;
    assert.ok(Math.abs(x1 - x0 - span) < 1e-6, `the window is half the time range: ${x0}..${x1}`);
    assert.ok(Math.abs(at - x0 - 0.25 * span) < 1e-6, `a quarter of it before the edge at ${at}: ${x0}..${x1}`);
    // Held: more data arrives (2 s = 4 more edges), the window does not move.
    await p.waitForTimeout(2000);
    assert.equal(Number(await attr(tile, "data-trigger-at")), at, "a single trigger stays on its edge");
    assert.equal(await state.getAttribute("data-state"), "triggered");
    await tile.screenshot({ path: join(artifacts, `widgets-scope-single-${theme}.png`) });
    // Arm: the next edge, a whole number of periods later.
    await tile.locator('[data-testid="plot-arm"]').click();
    await waitFor("the next edge", async () => Number(await attr(tile, "data-trigger-at")) > at + 1.5, 15000, 100);
    const next = Number(await attr(tile, "data-trigger-at"));
    const periods = (next - at) / PERIOD;
    assert.ok(Math.abs(periods - Math.round(periods)) < 0.08, `both are rising edges: ${at} → ${next}`);
    await context.close();
  });

  test(`an auto trigger keeps a stable waveform; peak hold, log axis, steps, stems and dots (${theme})`, async () => {
    const { context, p } = await dashboard(theme);
    const auto = tileOf(p, "Square auto");
    await auto.waitFor({ timeout: 10000 });
    const seen = [];
    await waitFor("three windows on new edges", async () => {
      const at = Number(await attr(auto, "data-trigger-at"));
      if (Number.isFinite(at) && at > 0 && !seen.includes(at)) seen.push(at);
      return seen.length >= 3;
    }, 20000, 100);
    for (let i = 1; i < seen.length; i++) {
      const periods = (seen[i] - seen[0]) / PERIOD;
      assert.ok(periods >= 0.9 && Math.abs(periods - Math.round(periods)) < 0.08, `edges ${seen.join(", ")} are whole periods apart`);
    }
    // The sine (5 ± 2): peak hold reads its lowest and highest; the log axis spans 1–10.
    const log = tileOf(p, "Sine log");
    await waitFor("the sine's peaks", async () => {
      const [lo, hi] = range(await attr(log, "data-peaks")) ?? [NaN, NaN];
      return lo < 3.1 && hi > 6.9;
    }, 15000, 200);
    const [lo, hi] = range(await attr(log, "data-peaks"));
    assert.ok(lo >= 2.99 && hi <= 7.01, `peaks ${lo}..${hi} of a 5 ± 2 sine`);
    assert.deepEqual(range(await attr(log, "data-y-range")), [1, 10]);
    await p.waitForTimeout(500);
    await p.screenshot({ path: join(artifacts, `widgets-scope-dashboard-${theme}.png`) });
    // Reset forgets the peaks; they come back from the data shown.
    await log.locator('[data-testid="plot-peaks-reset"]').click();
    await waitFor("peaks again", async () => !!(await attr(log, "data-peaks")), 5000, 100);
    await context.close();
  });
}
