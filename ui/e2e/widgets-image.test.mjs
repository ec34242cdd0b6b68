// Image views fed by a real serial device: a pty pair, the app on one end, the test writing
// the other. The "board" sends JPEG pictures (made by Chromium from a canvas, so a real
// encoder wrote them) between its telemetry frames `/*temperature,light,frame*/`, and PNG
// pictures framed by its own start and end bytes for a second view. The views show each
// new picture at its real size with its rate; the telemetry between the pictures still
// parses; a picture broken off mid-way is counted and the next one shows. Screenshots in
// light and dark. Runs against `sextant serve` in Chromium; the UI it serves is ui/dist, or
// $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { closeSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, ptyPair, servedProject, tempDir, waitFor } from "./harness.mjs";

const MARK_START = Buffer.from([0xaa, 0x55, 0xaa, 0x55]);
const MARK_END = Buffer.from([0x55, 0xaa, 0x55, 0xaa]);
let stage, browser, dir, url, pty, fd, timer, jpegs, pngs;

/** Pictures drawn on a canvas and encoded by the browser: `n` of each, numbered. */
async function pictures(page, type, w, h, n) {
  const encoded = await page.evaluate(
    async ([type, w, h, n]) => {
      const out = [];
      for (let k = 0; k < n; k++) {
        const c = document.createElement("canvas");
        c.width = w;
        c.height = h;
        const ctx = c.getContext("2d");
        ctx.fillStyle = `hsl(${(k * 47) % 360} 70% 45%)`;
        ctx.fillRect(0, 0, w, h);
        ctx.fillStyle = "#fff";
        ctx.font = `${Math.round(h / 2)}px sans-serif`;
        ctx.fillText(String(k), w / 4, (h * 2) / 3);
        out.push(c.toDataURL(type, 0.85).split(",")[1]);
      }
      return out;
    },
    [type, w, h, n],
  );
  return encoded.map((b) => Buffer.from(b, "base64"));
}

before(async () => {
  dir = tempDir("sextant-image-");
  pty = await ptyPair(dir);
  stage = await servedProject(dir, "camera", {
    format: "sextant-project", schemaVersion: 1, title: "Camera board",
    sources: [{
      id: "board", title: "Board", connection: { type: "serial", port: pty.a, baud: 115200 },
      framing: { mode: "startEnd", delimiterFormat: "text", start: "/*", end: ["*/"] },
      parser: { kind: "delimited", separator: "," },
    }],
    groups: [
      { id: "cam", title: "Camera", widget: "image", datasets: [] },
      { id: "thermal", title: "Thermal", widget: "image", datasets: [], image: { detection: "markers", start: "AA 55 AA 55", end: "55 AA 55 AA" } },
      { id: "env", title: "Environment", widget: "dataGrid", datasets: [
        { id: "temp", title: "Temperature", units: "°C", index: 1 },
        { id: "light", title: "Light", units: "lx", index: 2 },
        { id: "frame", title: "Frame", units: "", index: 3 },
      ] },
    ],
    workspaces: [{ id: "ws", title: "Camera", tiles: [
      { group: "cam", x: 0, y: 0, w: 6, h: 4 },
      { group: "thermal", x: 6, y: 0, w: 3, h: 4 },
      { group: "env", x: 9, y: 0, w: 3, h: 4 },
    ] }],
  });
  ({ url, browser } = stage);
  const maker = await browser.newPage();
  jpegs = await pictures(maker, "image/jpeg", 160, 120, 12);
  pngs = await pictures(maker, "image/png", 80, 60, 12);
  await maker.close();
  // The board: ten times a second a telemetry frame and a JPEG, and every fifth time a
  // framed PNG (which the camera's view, finding pictures by their format, sees too).
  fd = openSync(pty.b, "w");
  let k = 0;
  timer = setInterval(() => {
    const i = k++ % jpegs.length;
    const framed = k % 5 === 0 ? [MARK_START, pngs[i], MARK_END] : [];
    try {
      writeSync(fd, Buffer.concat([Buffer.from(`/*21.5,${300 + i},${k}*/\r\n`), jpegs[i], Buffer.from("\r\n"), ...framed]));
    } catch {}
  }, 100);
});

after(async () => {
  clearInterval(timer);
  if (fd != null) closeSync(fd);
  await stage?.stop();
  pty?.stop();
});

const view = (p, title) => p.locator(`[data-testid="widget"][data-title="${title}"] [data-testid="image-view"]`);
const num = async (loc, attr) => Number(await loc.getAttribute(attr));
/** The size the view shows, read at once (a newer picture may change both). */
const size = (loc) => loc.evaluate((e) => `${e.dataset.width}x${e.dataset.height}`);

for (const theme of ["light", "dark"]) {
  test(`pictures between telemetry frames show live, at their size and rate (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme, viewport: { width: 1280, height: 800 } });
    const cam = view(p, "Camera"), thermal = view(p, "Thermal");
    await cam.waitFor({ timeout: 10000 });
    await p.waitForTimeout(3000);
    console.log("DEBUG", await cam.evaluate((e) => JSON.stringify(e.dataset)), await p.evaluate(async () => {
      const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
      await new Promise((r) => (ws.onopen = r));
      ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
      ws.send(JSON.stringify({ type: "command", id: 1, command: "dashboard.image", params: { group: "cam" } }));
      ws.send(JSON.stringify({ type: "command", id: 2, command: "io.status", params: {} }));
      const out = [];
      await new Promise((r) => (ws.onmessage = (m) => { const d = JSON.parse(m.data); if (d.id) out.push(d); if (out.length >= 2) r(); }));
      return JSON.stringify(out).slice(0, 1500);
    }));
    await waitFor("a JPEG at its size", async () => (await size(cam)) === "160x120", 15000, 50);
    await waitFor("a framed PNG at its size", async () => (await size(thermal)) === "80x60", 15000, 50);
    // New pictures keep coming: the shown one changes.
    const seq = await num(cam, "data-seq");
    await waitFor("newer pictures", async () => (await num(cam, "data-seq")) >= seq + 5, 15000, 100);
    assert.match(await cam.locator(".stats").innerText(), /\d+×\d+/);
    assert.match(await cam.locator(".stats").innerText(), /pictures\/s|张/);
    assert.equal(await num(cam, "data-broken"), 0, "nothing broken so far");
    // The telemetry between the pictures still parses.
    const grid = p.locator('[data-testid="widget"][data-title="Environment"]');
    await waitFor("the temperature", async () => (await grid.innerText()).includes("21.5"), 10000, 100);

    await p.waitForTimeout(500);
    await p.locator('[data-testid="widget"][data-title="Camera"]').screenshot({ path: join(artifacts, `widgets-image-${theme}.png`) });
    await context.close();
  });
}

test("a picture broken off mid-way is counted and the next one shows", async () => {
  const { context, p } = await connectedDashboard(browser, url, {});
  const cam = view(p, "Camera");
  await waitFor("a JPEG at its size", async () => (await size(cam)) === "160x120", 15000, 50);
  const broken = await num(cam, "data-broken");
  // Half a JPEG, then telemetry: the board reset mid-picture. Written between two of the
  // board's own writes (one write of the pty is one piece).
  clearInterval(timer);
  writeSync(fd, Buffer.concat([jpegs[0].subarray(0, jpegs[0].length >> 1), Buffer.from("/*22.0,1,0*/\r\n")]));
  for (let k = 0; k < 3; k++) writeSync(fd, Buffer.concat([Buffer.from(`/*21.5,300,${k}*/\r\n`), jpegs[k + 1]]));
  await waitFor("the broken picture counted", async () => (await num(cam, "data-broken")) > broken, 10000, 100);
  const seq = await num(cam, "data-seq");
  writeSync(fd, jpegs[5]);
  await waitFor("the next picture shown", async () => (await num(cam, "data-seq")) > seq, 10000, 100);
  assert.equal(await size(cam), "160x120");
  await context.close();
});
