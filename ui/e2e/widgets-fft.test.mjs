// The FFT tile's y axis keeps the minus sign of negative dB ("−237.5" once read "237.5": the
// axis was 44 px wide and the sign fell off the canvas), in light and dark themes. The demo
// project with its Vibration channel (the Overview's FFT tile) turned down so far that its
// spectrum sits near −120 dB, three-digit negative labels; screenshots of the tile in both
// themes. Runs against `sextant serve` in Chromium like browser.test.mjs; the UI it serves is
// ui/dist, or $SEXTANT_UI_DIST (a build of the working tree in another folder).
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { artifacts, connectedDashboard, demoProject, repo, requireFile, requireProgram, sextantBin, servedUrl, start, tempDir, waitFor } from "./harness.mjs";

const MINUS = "\u2212";
const uiDist = process.env.SEXTANT_UI_DIST || join(repo, "ui/dist");
let server, browser, dir, url, vibUnits;

before(async () => {
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(uiDist, "index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  dir = tempDir("sextant-widgets-fft-");
  const project = demoProject();
  const vib = project.sources[0].connection.channels.find((c) => c.name === "Vibration");
  Object.assign(vib, { amplitude: 0.002 });
  vibUnits = project.groups.flatMap((g) => g.datasets).find((d) => d.title === "Vibration")?.units ?? "";
  const file = join(dir, "quiet-vibration.json");
  writeFileSync(file, JSON.stringify({ ...project, title: "Quiet vibration" }));
  const port = 7100 + Math.floor(Math.random() * 800);
  const proc = start(`widgets-fft-serve-${port}`, sextantBin, [
    "serve", "--http-port", String(port), "--ui", uiDist, "--data-dir", join(dir, "assistant"), "--allow-folder", dir, "--project", file,
  ], { cwd: dir });
  server = proc;
  url = await servedUrl(proc);
  browser = await chromium.launch({
    executablePath: chrome,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  server?.stop();
});

for (const theme of ["light", "dark"]) {
  test(`the FFT's y axis draws negative dB with their minus sign, whole (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme });
    const tile = p.locator('[data-testid="widget"][data-widget-kind="fft"]').first();
    await tile.waitFor({ timeout: 10000 });
    const plot = tile.locator('[data-testid="fft-plot"]');
    // The hooks: the y axis's labels as uPlot drew them, the room it had, their font.
    const ticks = await waitFor("the FFT's y labels", async () => {
      const s = await plot.getAttribute("data-y-ticks");
      return s && s.includes(MINUS) ? s.split("|") : null;
    }, 20000, 200);
    assert.ok(ticks.every((l) => l.startsWith(MINUS) || l === "0" || /^0\.0+$/.test(l)), `every dB label below zero keeps its sign: ${ticks}`);
    assert.ok(ticks.some((l) => /^\u2212\d{2}/.test(l)), `negative labels of two digits or more: ${ticks}`);
    assert.ok(!ticks.some((l) => l.includes("-")), "one minus sign, not the hyphen");
    // Each label, minus included, fits the axis: the widest one measured in the axis's font
    // plus the tick (10) and the gap (5) is within the axis's width.
    const [axisPx, font] = [Number(await plot.getAttribute("data-y-axis-px")), await plot.getAttribute("data-y-font")];
    const widest = await p.evaluate(({ labels, font }) => {
      const ctx = document.createElement("canvas").getContext("2d");
      ctx.font = font;
      return Math.max(...labels.map((l) => ctx.measureText(l).width)) / (window.devicePixelRatio || 1);
    }, { labels: ticks, font });
    assert.ok(axisPx >= widest + 15, `y axis ${axisPx}px for labels ${widest}px wide`);
    // The units: Hz along x, dB (of the dataset's unit) up y.
    assert.equal(await plot.getAttribute("data-x-unit"), "Hz");
    assert.equal(await plot.getAttribute("data-y-unit"), vibUnits ? `dB re 1 ${vibUnits}` : "dB");
    await p.waitForTimeout(300);
    await tile.screenshot({ path: join(artifacts, `widgets-fft-negative-db-${theme}.png`) });
    await p.click('[data-nav="connect"]');
    if (await p.locator('[data-testid="disconnect"]').isVisible()) await p.click('[data-testid="disconnect"]');
    await context.close();
  });
}
