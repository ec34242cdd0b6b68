// The waterfall (spectrogram), fed by the simulator: a 10 Hz and a 30 Hz sine sampled at
// 200 frames/s, each with a waterfall view. Rows pile up one per drawn frame (never more
// than the history setting), the loudest bin of the newest row is the sine's frequency,
// and a colormap changed in the project editor reaches the tile. Screenshots in light and
// dark. Runs against `sextant serve` in Chromium; the UI it serves is ui/dist, or
// $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, demoProject, servedProject, tempDir, waitFor } from "./harness.mjs";

const RATE = 200, SAMPLES = 256; // a bin is 200/256 ≈ 0.78 Hz wide
let stage, browser, dir, url;

before(async () => {
  dir = tempDir("sextant-waterfall-");
  const project = demoProject();
  const channels = [
    { name: "Hum", waveform: "sine", frequencyHz: 10, amplitude: 1, offset: 0, noise: 0.05 },
    { name: "Whine", waveform: "sine", frequencyHz: 30, amplitude: 0.5, offset: 0, noise: 0.05 },
  ];
  project.sources = [{ ...project.sources[0], connection: { type: "simulator", frameRateHz: RATE, channels, gps: false, imu: false, seed: 1 } }];
  project.groups = [{
    id: "g", title: "Vibration", widget: "none", datasets: [
      { id: "hum", title: "Hum", units: "g", index: 1, graph: false, fftSamples: SAMPLES, waterfall: { colormap: "viridis", history: 64 } },
      { id: "whine", title: "Whine", units: "g", index: 2, graph: false, fftSamples: SAMPLES, waterfall: { colormap: "inferno", history: 128 } },
    ],
  }];
  project.workspaces = [{ id: "ws", title: "Spectra", tiles: [
    { dataset: "hum", view: "waterfall", x: 0, y: 0, w: 6, h: 5 },
    { dataset: "whine", view: "waterfall", x: 6, y: 0, w: 6, h: 5 },
  ] }];
  project.actions = [];
  stage = await servedProject(dir, "spectra", { ...project, title: "Spectra" });
  ({ url, browser } = stage);
});

after(async () => {
  await stage?.stop();
});

const tile = (p, title) => p.locator(`[data-testid="widget"][data-widget-kind="waterfall"][data-title="${title}"] [data-testid="waterfall"]`);

for (const theme of ["light", "dark"]) {
  test(`each waterfall piles up rows of its own spectrum, peak at its sine (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme, settings: { refreshHz: 30 }, viewport: { width: 1280, height: 800 } });
    const hum = tile(p, "Hum"), whine = tile(p, "Whine");
    await hum.waitFor({ timeout: 10000 });
    await waitFor("rows of the hum", async () => Number(await hum.getAttribute("data-rows")) >= 64, 20000, 100);
    await waitFor("rows of the whine", async () => Number(await whine.getAttribute("data-rows")) >= 64, 20000, 100);
    // Never more rows than the history keeps.
    await p.waitForTimeout(1500);
    assert.equal(Number(await hum.getAttribute("data-rows")), 64);
    assert.ok(Number(await whine.getAttribute("data-rows")) <= 128);
    const bin = RATE / SAMPLES;
    for (const [loc, hz] of [[hum, 10], [whine, 30]]) {
      const peak = Number(await loc.getAttribute("data-peak-hz"));
      assert.ok(Math.abs(peak - hz) <= 1.5 * bin, `peak at ${peak} Hz, sine at ${hz} Hz`);
    }
    assert.equal(await hum.getAttribute("data-colormap"), "viridis");
    assert.equal(await whine.getAttribute("data-colormap"), "inferno");
    await p.locator('[data-testid="widget"][data-widget-kind="waterfall"]').first().screenshot({ path: join(artifacts, `widgets-waterfall-${theme}.png`) });
    await context.close();
  });
}

test("a colormap chosen in the project editor reaches the tile", async () => {
  const { context, p } = await connectedDashboard(browser, url, {});
  await tile(p, "Hum").waitFor({ timeout: 10000 });
  await p.click('[data-nav="project"]');
  await p.locator('[data-testid="tree-dataset"]', { hasText: "Hum" }).first().click();
  await p.selectOption('[data-testid="dataset-colormap"]', "turbo");
  await p.click('[data-nav="dashboard"]');
  await waitFor("the turbo colormap", async () => (await tile(p, "Hum").getAttribute("data-colormap")) === "turbo", 10000, 100);
  await context.close();
});
