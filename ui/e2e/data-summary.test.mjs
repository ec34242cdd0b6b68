// A person's Summary, without the assistant: on a recorded session (the Recording screen)
// and on the range a plot is zoomed to (the dashboard), both through data.summary. The
// session's figures are checked against its CSV export, computed here; the plot's range
// is the one it shows, and its figures are data.summary's for that range.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, loadProject, pageCommand, servedProject, sleep, tempDir, waitFor } from "./harness.mjs";

let stage, dir;

before(async () => {
  dir = tempDir("sextant-summary-");
  stage = await servedProject(dir, "summary", loadProject({ plots: 2, rate: 200 }));
});

after(async () => {
  await stage?.stop();
});

const call = pageCommand;

/** A shown figure as a number (units and grouping removed). */
const shown = (text) => Number(text.replace(/[^0-9.eE+-]/g, ""));

test("a recorded session's Summary: count, min, max and mean of every dataset, as its CSV export gives them", async () => {
  const context = await stage.browser.newContext({ viewport: { width: 1400, height: 900 } });
  await context.addInitScript(() => localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en" })));
  const page = await context.newPage();
  page.on("pageerror", (e) => console.error("page error:", e.message));
  await page.goto(stage.url);
  await page.waitForSelector(".shell");
  await call(page, "sessions.setDatabase", { path: join(dir, "sessions.sqlite") });
  await call(page, "io.connect");
  const { id } = await call(page, "sessions.startRecording", { title: "Summary run" });
  await sleep(1500);
  await call(page, "sessions.stopRecording");
  await call(page, "io.disconnect");
  const { csv } = await call(page, "sessions.csv", { id });
  const [header, ...rows] = csv.trim().split("\n");
  const columns = header.split(",");

  await page.click('[data-nav="recording"]');
  const row = page.locator(`[data-testid="session-row"][data-session-id="${id}"]`);
  await row.locator('[data-testid="session-summary"]').click();
  const table = page.locator('[data-testid="session-summary-row"] [data-testid="data-summary-row"]');
  await table.first().waitFor({ timeout: 10000 });
  assert.equal(await table.count(), columns.length - 1);
  for (const [k, column] of columns.slice(1).entries()) {
    const values = rows.map((r) => Number(r.split(",")[k + 1]));
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    const cells = table.filter({ has: page.locator(`td:text-is("${column}")`) });
    const cell = async (field) => shown(await cells.locator(`[data-field="${field}"]`).innerText());
    assert.equal(await cell("count"), values.length, `${column} count`);
    // Shown to three decimals.
    for (const [field, want] of [["min", Math.min(...values)], ["max", Math.max(...values)], ["mean", mean]]) {
      const got = await cell(field);
      assert.ok(Math.abs(got - want) <= 0.0006, `${column} ${field}: shown ${got}, the CSV gives ${want}`);
    }
  }
  await page.screenshot({ path: join(artifacts, "browser-session-summary-light-en.png") });
  await context.close();
});

test("a plot zoomed to a range: its Summary is of that range and of the plot's datasets (dark, 简体中文)", async () => {
  const { context, p } = await connectedDashboard(stage.browser, stage.url, { theme: "dark", language: "zh" });
  try {
    const tile = p.locator('[data-testid="widget"]').first();
    await tile.locator("canvas").first().waitFor();
    await sleep(2500);
    // Drag across the middle of the plot: it zooms to that range and stops following.
    const over = await tile.locator(".u-over").boundingBox();
    await p.mouse.move(over.x + over.width * 0.6, over.y + over.height / 2);
    await p.mouse.down();
    await p.mouse.move(over.x + over.width * 0.9, over.y + over.height / 2, { steps: 8 });
    await p.mouse.up();
    await tile.locator('[data-testid="plot-summary"]').click();
    const panel = tile.locator('[data-testid="plot-summary-panel"]');
    const rows = panel.locator('[data-testid="data-summary-row"]');
    await panel.waitFor({ timeout: 5000 });
    await waitFor("the summary's rows", async () => (await rows.count()) > 0 || (await panel.innerText()).includes("无法"), 10000);
    assert.ok(await rows.count(), await panel.innerText());
    const fromS = Number(await panel.getAttribute("data-from-s"));
    const toS = Number(await panel.getAttribute("data-to-s"));
    assert.ok(toS > fromS, `the range ${fromS}–${toS}`);
    assert.equal(await rows.count(), 1, "the plot's one dataset");
    const dataset = await rows.first().getAttribute("data-dataset");
    const want = (await call(p, "data.summary", { window: { fromS, toS }, datasets: [dataset] })).datasets[0];
    assert.ok(want.count > 10, JSON.stringify(want));
    assert.equal(shown(await rows.first().locator('[data-field="count"]').innerText()), want.count);
    assert.ok(want.firstS >= fromS && want.lastS <= toS, JSON.stringify(want));
    assert.match(await panel.innerText(), /最小值/);
    await p.screenshot({ path: join(artifacts, "browser-plot-summary-dark-zh.png") });
  } finally {
    await call(p, "io.disconnect").catch(() => {});
    await context.close();
  }
});
