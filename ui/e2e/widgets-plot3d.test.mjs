// The 3-D plot, fed by the simulator: three sines at different rates (a Lissajous knot) as
// the x, y and z of a plot3d group. The trail fills with the newest samples; a drag orbits
// it (the camera's azimuth moves and the picture changes), the wheel zooms, Reset comes
// back to the first view. Screenshots in light and dark. Runs against `sextant serve` in
// Chromium (WebGL on its software renderer); the UI it serves is ui/dist, or
// $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, demoProject, servedProject, tempDir, waitFor } from "./harness.mjs";

let stage, browser, dir, url;

before(async () => {
  dir = tempDir("sextant-plot3d-");
  const project = demoProject();
  const channels = [
    { name: "X", waveform: "sine", frequencyHz: 1, amplitude: 1, offset: 0, noise: 0 },
    { name: "Y", waveform: "sine", frequencyHz: 1.5, amplitude: 2, offset: 0, noise: 0 },
    { name: "Z", waveform: "sine", frequencyHz: 2.5, amplitude: 30, offset: 100, noise: 0 },
  ];
  project.sources = [{ ...project.sources[0], connection: { type: "simulator", frameRateHz: 200, channels, gps: false, imu: false, seed: 1 } }];
  project.groups = [{
    id: "knot", title: "Knot", widget: "plot3d", datasets: [
      { id: "x", title: "X", units: "V", index: 1, role: "x", graph: false },
      { id: "y", title: "Y", units: "A", index: 2, role: "y", graph: false },
      { id: "z", title: "Z", units: "°C", index: 3, role: "z", graph: false },
    ],
  }];
  project.workspaces = [{ id: "ws", title: "3-D", tiles: [{ group: "knot", x: 0, y: 0, w: 8, h: 6 }] }];
  project.actions = [];
  stage = await servedProject(dir, "knot", { ...project, title: "Knot" });
  ({ url, browser } = stage);
});

after(async () => {
  await stage?.stop();
});

for (const theme of ["light", "dark"]) {
  test(`the 3-D trail fills, orbits under a drag, zooms and resets (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme, settings: { points: 600, refreshHz: 30 }, viewport: { width: 1280, height: 900 } });
    const plot = p.locator('[data-testid="plot3d"]');
    await plot.waitFor({ timeout: 10000 });
    assert.equal(await plot.getAttribute("data-renderer"), "webgl");
    await waitFor("a trail of the newest samples", async () => Number(await plot.getAttribute("data-points")) >= 500, 15000, 100);
    assert.ok(Number(await plot.getAttribute("data-points")) <= 600, "no more than the points setting");
    // Each axis is labelled with its dataset and the range it is fitted to.
    const legend = await plot.locator(".legend").innerText();
    assert.match(legend, /x: X \(V\)/);
    assert.match(legend, /z: Z \(°C\)/);
    assert.match(legend, /7\d(\.\d+)? … 1[23]\d/, "z spans its sine around 100");

    // Pause, so the pictures compared differ only by the view.
    await p.evaluate(() => document.querySelector('[data-testid="pause"]')?.click());
    await p.waitForTimeout(300);
    const az0 = Number(await plot.getAttribute("data-azimuth"));
    const before = await plot.screenshot();
    const box = await plot.boundingBox();
    await p.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await p.mouse.down();
    await p.mouse.move(box.x + box.width / 2 + 220, box.y + box.height / 2 + 40, { steps: 10 });
    await p.mouse.up();
    await waitFor("the view orbits", async () => Math.abs(Number(await plot.getAttribute("data-azimuth")) - az0) > 0.5, 5000, 50);
    const turned = await plot.screenshot();
    assert.notDeepEqual(turned, before, "the picture turned with the view");
    await plot.screenshot({ path: join(artifacts, `widgets-plot3d-${theme}.png`) });

    // The wheel zooms in.
    const d0 = Number(await plot.getAttribute("data-distance"));
    await p.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await p.mouse.wheel(0, -400);
    await waitFor("zoomed in", async () => Number(await plot.getAttribute("data-distance")) < d0 * 0.9, 5000, 50);

    // Reset comes back to the first view.
    await plot.locator('[data-testid="plot3d-reset"]').click();
    await waitFor("back home", async () => Math.abs(Number(await plot.getAttribute("data-azimuth")) - az0) < 1e-3, 5000, 50);
    assert.ok(Math.abs(Number(await plot.getAttribute("data-distance")) - d0) < 1e-3);
    await p.evaluate(() => document.querySelector('[data-testid="pause"]')?.click());
    await context.close();
  });
}
