// The tile menu: a plot tile's ⋯ button opens its settings (by keyboard too), a bad range is
// refused in place and changes nothing, a good one becomes the dataset's min/max in the
// project (read back over the UI's WebSocket) and the plot's y axis; Escape closes it and
// gives focus back. Screenshots of the open menu in light and dark. Runs against
// `sextant serve` in Chromium like widgets-fft.test.mjs; the UI it serves is ui/dist, or
// $SEXTANT_UI_DIST (a build of the working tree in another folder).
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import { artifacts, connectedDashboard, demoProject, repo, requireFile, requireProgram, sextantBin, servedUrl, start, tempDir, waitFor } from "./harness.mjs";

const uiDist = process.env.SEXTANT_UI_DIST || join(repo, "ui/dist");
let server, browser, dir, url;

before(async () => {
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(uiDist, "index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  mkdirSync(artifacts, { recursive: true });
  dir = tempDir("sextant-tile-menu-");
  const project = demoProject();
  const pressure = project.groups.flatMap((g) => g.datasets).find((d) => d.title === "Pressure");
  const fft = project.groups.flatMap((g) => g.datasets).find((d) => d.fft);
  const power = project.groups.find((g) => g.widget === "multiPlot");
  const gauge = project.groups.flatMap((g) => g.datasets).find((d) => d.widget === "gauge");
  // One workspace with a time plot of Pressure (no range of its own) first, and a
  // multi-plot, a gauge and an FFT beside it.
  project.workspaces = [{
    id: "ws-1", title: "Overview", tiles: [
      { group: null, dataset: pressure.id, view: "plot", x: 0, y: 0, w: 6, h: 4 },
      { group: power.id, dataset: null, x: 6, y: 0, w: 6, h: 4 },
      { group: null, dataset: gauge.id, x: 0, y: 4, w: 3, h: 4 },
      { group: null, dataset: fft.id, view: "fft", x: 3, y: 4, w: 6, h: 4 },
    ],
  }];
  const file = join(dir, "tile-menu.json");
  writeFileSync(file, JSON.stringify({ ...project, title: "Tile menu" }));
  const port = 7100 + Math.floor(Math.random() * 800);
  server = start(`tile-menu-serve-${port}`, sextantBin, [
    "serve", "--http-port", String(port), "--ui", uiDist, "--data-dir", join(dir, "assistant"), "--allow-folder", dir, "--project", file,
  ], { cwd: dir });
  url = await servedUrl(server);
  browser = await chromium.launch({
    executablePath: chrome,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
});

after(async () => {
  await browser?.close();
  server?.stop();
});

/** A dataset of the open project by title, read over the UI's WebSocket. */
function datasetByTitle(p, title) {
  return p.evaluate(async (title) => {
    const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
    const project = await new Promise((resolve) => {
      ws.onopen = () => {
        ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
        ws.send(JSON.stringify({ type: "command", id: 1, command: "project.get" }));
      };
      ws.onmessage = (e) => JSON.parse(e.data).id === 1 && resolve(JSON.parse(e.data).result);
    });
    ws.close();
    return project.groups.flatMap((g) => g.datasets).find((d) => d.title === title);
  }, title);
}

async function dashboard(theme, language = "en") {
  const { context, p } = await connectedDashboard(browser, url, { theme, language });
  const tile = p.locator('[data-testid="widget"][data-widget-kind="plot"][data-title="Pressure"]');
  await tile.waitFor({ timeout: 10000 });
  return { context, p, tile };
}

/** The open menu and its tile, in one picture. */
async function shoot(p, tile, name) {
  const a = await tile.boundingBox(), b = await p.locator('[data-testid="tile-menu"]').boundingBox();
  const x = Math.min(a.x, b.x), y = Math.min(a.y, b.y);
  const clip = { x, y, width: Math.max(a.x + a.width, b.x + b.width) - x, height: Math.max(a.y + a.height, b.y + b.height) - y };
  await p.screenshot({ path: join(artifacts, name), clip });
}

test("a plot tile's menu sets its y range through the project, and refuses a bad one", async () => {
  const { context, p, tile } = await dashboard("light");
  const button = tile.locator('[data-testid="tile-menu-button"]');
  // Plot-like tiles have the button; the gauge and FFT too; with the keyboard it opens.
  for (const kind of ["multiplot", "gauge", "fft"]) {
    assert.equal(await p.locator(`[data-testid="widget"][data-widget-kind="${kind}"] [data-testid="tile-menu-button"]`).count(), 1, `${kind} has a menu`);
  }
  assert.equal(await button.getAttribute("aria-expanded"), "false");
  await button.focus();
  await p.keyboard.press("Enter");
  const menu = p.locator('[data-testid="tile-menu"]');
  await menu.waitFor();
  assert.equal(await button.getAttribute("aria-expanded"), "true");
  assert.match(await menu.locator('[data-testid="tile-points"]').innerText(), /Points/);
  assert.ok(await menu.locator('[data-testid="tile-range-auto"]').isChecked(), "no range yet: automatic");

  // Escape closes it and gives the focus back to the button.
  await p.keyboard.press("Escape");
  await menu.waitFor({ state: "detached" });
  assert.equal(await p.evaluate(() => document.activeElement?.getAttribute("data-testid")), "tile-menu-button");

  // A click outside closes it too.
  await button.click();
  await menu.waitFor();
  await p.mouse.click(5, 790);
  await menu.waitFor({ state: "detached" });

  await button.click();
  await menu.locator('[data-testid="tile-range-fixed"]').check();
  await menu.locator('[data-testid="tile-range-min"]').fill("110");
  await menu.locator('[data-testid="tile-range-max"]').fill("90");
  await menu.locator('[data-testid="tile-menu-apply"]').click();
  const error = menu.locator('[data-testid="tile-menu-error"]');
  await error.waitFor();
  assert.match(await error.innerText(), /maximum must be greater than the minimum/);
  assert.equal(await menu.locator('[data-testid="tile-range-max"]').getAttribute("aria-invalid"), "true");
  await shoot(p, tile, "tile-menu-error-light.png");
  await menu.locator('[data-testid="tile-range-min"]').fill("ten");
  await menu.locator('[data-testid="tile-menu-apply"]').click();
  await waitFor("a number asked for", async () => /Enter a number/.test(await menu.innerText()));
  let d = await datasetByTitle(p, "Pressure");
  assert.equal(d.min, null, "a refused range changes nothing");
  assert.equal(d.max, null);

  await menu.locator('[data-testid="tile-range-min"]').fill("90");
  await menu.locator('[data-testid="tile-range-max"]').fill("110");
  await menu.locator('[data-testid="tile-units"]').fill("  hPa ");
  await menu.locator('[data-testid="tile-menu-apply"]').click();
  await menu.waitFor({ state: "detached" });
  d = await waitFor("the range in the project", async () => {
    const x = await datasetByTitle(p, "Pressure");
    return x.min === 90 && x.max === 110 ? x : null;
  }, 10000, 200);
  assert.equal(d.units, "hPa", "units trimmed");
  // The plot shows the range it was given.
  await waitFor("the plot's y range", async () => (await tile.locator(".plotbox").getAttribute("data-y-range")) === "90,110", 10000, 200);

  // Back to automatic: both bounds cleared.
  await button.click();
  assert.ok(await menu.locator('[data-testid="tile-range-fixed"]').isChecked());
  await menu.locator('[data-testid="tile-range-auto"]').check();
  await menu.locator('[data-testid="tile-menu-apply"]').click();
  await menu.waitFor({ state: "detached" });
  await waitFor("the range cleared", async () => {
    const x = await datasetByTitle(p, "Pressure");
    return x.min === null && x.max === null;
  }, 10000, 200);
  await context.close();
});

for (const [theme, language] of [["light", "en"], ["dark", "en"], ["light", "zh"], ["dark", "zh"]]) {
  test(`the open tile menu (${theme}, ${language})`, async () => {
    const { context, p, tile } = await dashboard(theme, language);
    await tile.locator('[data-testid="tile-menu-button"]').click();
    const menu = p.locator('[data-testid="tile-menu"]');
    await menu.waitFor();
    await menu.locator('[data-testid="tile-range-fixed"]').check();
    await menu.locator('[data-testid="tile-range-min"]').fill("80");
    await menu.locator('[data-testid="tile-range-max"]').fill("120");
    await p.waitForTimeout(300);
    await shoot(p, tile, `tile-menu-open-${theme}-${language}.png`);
    // The FFT's menu: its units and window.
    await p.keyboard.press("Escape");
    const fft = p.locator('[data-testid="widget"][data-widget-kind="fft"]');
    await fft.locator('[data-testid="tile-menu-button"]').click();
    await menu.waitFor();
    assert.equal(await menu.locator('[data-testid="tile-window"]').count(), 1);
    assert.equal(await menu.locator('[data-testid="tile-range-auto"]').count(), 0, "an FFT's y axis is in dB: no range");
    await shoot(p, fft, `tile-menu-fft-${theme}-${language}.png`);
    await context.close();
  });
}
