// The dashboard under load: the simulator at 100 000 frames/s (16 channels) into 16 plots
// showing 10 000 points each, in Chromium against `sextant serve`. Measures the dashboard's
// drawn frame rate and the backend's CPU use; prints them and writes target/e2e/bench-ui.json.
//
//   node ui/e2e/bench-ui.mjs [--seconds 10] [--rate 100000] [--plots 16] [--points 10000]
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { artifacts, demoProject, repo, requireProgram, servedUrl, sextantBin, sleep, start, tempDir, waitFor } from "./harness.mjs";

const arg = (name, d) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const seconds = arg("seconds", 10), rate = arg("rate", 100000), plots = arg("plots", 16), points = arg("points", 10000);

// A project of `plots` simulated channels, each its own plot tile.
const project = demoProject();
const channels = Array.from({ length: plots }, (_, i) => ({
  name: `ch${i + 1}`, waveform: "sine", frequencyHz: 0.5 + i * 0.25, amplitude: 1, offset: i, noise: 0.05,
}));
project.sources = [{
  ...project.sources[0],
  connection: { type: "simulator", frameRateHz: rate, channels, gps: false, imu: false, seed: 3 },
}];
project.groups = [{
  id: "grp-1", title: "Channels", widget: "none",
  datasets: channels.map((c, i) => ({ id: `ds-${i + 1}`, title: c.name, units: "", index: i + 1, graph: true })),
}];
project.workspaces = [{
  id: "ws-1", title: "Load",
  tiles: channels.map((_, i) => ({ dataset: `ds-${i + 1}`, x: (i % 4) * 3, y: Math.floor(i / 4) * 3, w: 3, h: 3 })),
}];
project.actions = [];
const dir = tempDir("sextant-bench-ui-");
const projectPath = join(dir, "bench.json");
writeFileSync(projectPath, JSON.stringify(project));

const port = 7900 + Math.floor(Math.random() * 90);
const server = start("bench-serve", sextantBin, ["serve", "--http-port", String(port), "--ui", join(repo, "ui/dist"), "--project", projectPath, "--data-dir", join(dir, "assistant")]);
const url = await servedUrl(server);
const browser = await chromium.launch({
  executablePath: requireProgram("chromium", "chromium"),
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
await page.addInitScript((p) => {
  localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en", refreshHz: 60, points: p, timeRangeS: 10 }));
}, points);
await page.goto(url);
await page.waitForSelector(".shell");
// Connect through the UI's own transport path (the Connect screen's button).
await page.evaluate(async () => {
  const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
  await new Promise((r) => (ws.onopen = r));
  ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
  ws.send(JSON.stringify({ type: "command", id: 1, command: "io.connect" }));
  await new Promise((r) => (ws.onmessage = (m) => JSON.parse(m.data).id === 1 && r()));
});
await waitFor("16 drawn plots", async () => (await page.locator('[data-testid="widget"] canvas').count()) >= plots, 20000);
await sleep(3000); // warm up: windows fill, JIT settles

const cpuTicks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(f[11]) + Number(f[12]); // utime + stime, in clock ticks
};
const hz = 100; // USER_HZ on Linux
const status = async () =>
  page.evaluate(async () => {
    const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
    await new Promise((r) => (ws.onopen = r));
    ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
    ws.send(JSON.stringify({ type: "command", id: 1, command: "io.status" }));
    const m = await new Promise((r) => (ws.onmessage = (m) => JSON.parse(m.data).id === 1 && r(m)));
    ws.close();
    return JSON.parse(m.data).result;
  });
const s0 = await status();
const c0 = cpuTicks(server.child.pid);
const d0 = await page.evaluate(() => ({ ...window.__sextantStats, t: performance.now() }));
const t0 = Date.now();
await sleep(seconds * 1000);
const d1 = await page.evaluate(() => ({ ...window.__sextantStats, t: performance.now() }));
const c1 = cpuTicks(server.child.pid);
const s1 = await status();
const wall = (Date.now() - t0) / 1000;
const frames = (s) => s.sources.reduce((n, x) => n + x.frames, 0);
const result = {
  plots, pointsPerPlot: points, simulatorRateHz: rate, seconds: wall,
  ingestFramesPerS: Math.round((frames(s1) - frames(s0)) / wall),
  droppedChunks: s1.sources.reduce((n, x) => n + x.droppedChunks, 0),
  dashboardFps: +(((d1.drawnFrames - d0.drawnFrames) * 1000) / (d1.t - d0.t)).toFixed(1),
  displayFramesPerS: +(((d1.framesReceived - d0.framesReceived) * 1000) / (d1.t - d0.t)).toFixed(1),
  backendCpuPercent: +((((c1 - c0) / hz) / wall) * 100).toFixed(1),
  machineCores: (await import("node:os")).cpus().length,
};
console.log(JSON.stringify(result, null, 2));
writeFileSync(join(artifacts, "bench-ui.json"), JSON.stringify(result, null, 2));
await page.screenshot({ path: join(artifacts, "bench-ui.png") });
await browser.close();
server.stop();
process.exit(0);
