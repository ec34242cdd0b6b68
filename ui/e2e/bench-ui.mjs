// The dashboard under load: the simulator at 100 000 frames/s (16 channels) into 16 plots
// showing 10 000 points each. Measures the dashboard's drawn frame rate, where a frame's
// time goes (the page's own split and Chromium's trace), the backend's CPU use, and how
// long start-up takes; prints them and writes target/e2e/bench-ui.json.
//
//   node ui/e2e/bench-ui.mjs [--seconds 10] [--rate 100000] [--plots 16] [--points 10000] [--ui DIR]
//   node ui/e2e/bench-ui.mjs --webview [same options]
//
// Without --webview: headless Chromium (software rendering) against a release `sextant
// serve`, and the time from launching `sextant serve` to its first display frame.
// --webview: the desktop app (SEXTANT_DESKTOP_BIN, a release build) in its real webview,
// WebKitGTK under Xvfb, driven by tauri-driver; first, the time from launching it (with the
// bench's project and --connect) to the first frame with data drawn, three launches "bare"
// (an X server only) and three as in a desktop session (a session bus running), each way
// launched directly (the time is when the app's log says so) and then through the driver
// (which also splits the time). --ui serves another build of the page (e.g. an older one).
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import {
  WebDriver, artifacts, loadProject, desktopBin, repo, requireFile, requireProgram, servedUrl, sextantBin, sleep, start,
  tempDir, waitFor, xvfb,
} from "./harness.mjs";

const arg = (name, d) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const uiDir = process.argv.includes("--ui") ? process.argv[process.argv.indexOf("--ui") + 1] : join(repo, "ui/dist");
const seconds = arg("seconds", 10), rate = arg("rate", 100000), plots = arg("plots", 16), points = arg("points", 10000);
const webview = process.argv.includes("--webview");

const project = loadProject({ plots, rate });
const dir = tempDir("sextant-bench-ui-");
const projectPath = join(dir, "bench.json");
writeFileSync(projectPath, JSON.stringify(project));
const viewSettings = { theme: "light", language: "en", refreshHz: 60, points, timeRangeS: 10 };

const hz = 100; // USER_HZ on Linux
const cpuTicks = (pid) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(f[11]) + Number(f[12]); // utime + stime, in clock ticks
};
/** When a process started, in ms since the epoch (from /proc: ticks after boot). The boot's
 *  own time comes from `/proc/uptime`, which has hundredths: `/proc/stat`'s `btime` is whole
 *  seconds, cut, so start-up times measured from it came out up to a second long. */
const startedAt = (pid) => {
  const ticks = Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[19]);
  const bootMs = Date.now() - Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 1000;
  return bootMs + (ticks * 1000) / hz;
};

if (webview) await benchWebview();

const startup = await serveStartup();
const port = 7900 + Math.floor(Math.random() * 90);
const server = start("bench-serve", sextantBin, ["serve", "--http-port", String(port), "--ui", uiDir, "--project", projectPath, "--data-dir", join(dir, "assistant")]);
const url = await servedUrl(server);
const browser = await chromium.launch({
  executablePath: requireProgram("chromium", "chromium"),
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
await page.addInitScript((s) => localStorage.setItem("sextant.settings", JSON.stringify(s)), viewSettings);
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
// The renderer's own accounting of its main thread (Chromium's Performance domain).
const cdp = await page.context().newCDPSession(page);
await cdp.send("Performance.enable");
const metrics = async () => Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((m) => [m.name, m.value]));
const s0 = await status();
const c0 = cpuTicks(server.child.pid);
const m0 = await metrics();
const d0 = await page.evaluate(() => ({ ...window.__sextantStats, t: performance.now() }));
const t0 = Date.now();
await sleep(seconds * 1000);
const d1 = await page.evaluate(() => ({ ...window.__sextantStats, t: performance.now() }));
const m1 = await metrics();
const c1 = cpuTicks(server.child.pid);
const s1 = await status();
const wall = (Date.now() - t0) / 1000;
const drawn = d1.drawnFrames - d0.drawnFrames;
const perFrame = (ms) => +(ms / Math.max(1, drawn)).toFixed(2);
const busy = (k) => (m1[k] - m0[k]) * 1000; // seconds → ms over the run
// Where a drawn frame's time went, in ms per drawn frame: the page's own split (decoding
// display frames; widgets' draws, uPlot's included, which it does synchronously), then the
// renderer's (all script, style, layout) and what else its main thread did (paint, commit,
// GC, idle tasks). The remainder of a frame is the main thread waiting: for the raster
// threads or the cores, which the backend shares.
const budget = {
  decodeMs: perFrame(d1.decodeMs - d0.decodeMs),
  drawMs: perFrame(d1.drawMs - d0.drawMs),
  scriptMs: perFrame(busy("ScriptDuration")),
  styleMs: perFrame(busy("RecalcStyleDuration")),
  layoutMs: perFrame(busy("LayoutDuration")),
  mainThreadBusyMs: perFrame(busy("TaskDuration")),
  frameMs: perFrame((d1.t - d0.t)),
  displayBytesPerFrame: Math.round((d1.bytesReceived - d0.bytesReceived) / Math.max(1, d1.framesReceived - d0.framesReceived)),
};
// A short trace, summed by event (self time, per thread), for the note: what exactly the
// main thread and the raster threads spent their time on.
await browser.startTracing(page, { categories: (process.env.BENCH_TRACE_CATEGORIES ?? "devtools.timeline,disabled-by-default-devtools.timeline,v8,cc,gpu").split(",") });
await sleep(2000);
const trace = JSON.parse((await browser.stopTracing()).toString("utf8"));
const traced = selfTimes(trace.traceEvents ?? trace, 2000);
const frames = (s) => s.sources.reduce((n, x) => n + x.frames, 0);
const result = {
  plots, pointsPerPlot: points, simulatorRateHz: rate, seconds: wall,
  ingestFramesPerS: Math.round((frames(s1) - frames(s0)) / wall),
  droppedChunks: s1.sources.reduce((n, x) => n + x.droppedChunks, 0),
  dashboardFps: +((drawn * 1000) / (d1.t - d0.t)).toFixed(1),
  displayFramesPerS: +(((d1.framesReceived - d0.framesReceived) * 1000) / (d1.t - d0.t)).toFixed(1),
  backendCpuPercent: +((((c1 - c0) / hz) / wall) * 100).toFixed(1),
  machineCores: (await import("node:os")).cpus().length,
  budget,
  trace: traced,
  serveStartup: startup,
};
console.log(JSON.stringify(result, null, 2));
writeFileSync(join(artifacts, "bench-ui.json"), JSON.stringify(result, null, 2));
await page.screenshot({ path: join(artifacts, "bench-ui.png") });
await browser.close();
server.stop();
process.exit(0);

/** Self time of every complete event, per thread (busiest threads first, each with its top
 *  events), in ms per second of trace: nested events are subtracted from their parent. */
function selfTimes(events, traceMs) {
  const names = new Map();
  for (const e of events) if (e.ph === "M" && e.name === "thread_name") names.set(`${e.pid}:${e.tid}`, e.args.name);
  const byThread = new Map();
  for (const e of events) {
    if (e.ph !== "X" || typeof e.dur !== "number") continue;
    const k = `${e.pid}:${e.tid}`;
    if (!byThread.has(k)) byThread.set(k, []);
    byThread.get(k).push(e);
  }
  const out = [];
  for (const [k, list] of byThread) {
    list.sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    const self = new Map();
    const stack = [];
    let total = 0;
    for (const e of list) {
      while (stack.length && stack[stack.length - 1].end <= e.ts) stack.pop();
      const parent = stack[stack.length - 1];
      if (parent) self.set(parent.name, self.get(parent.name) - Math.min(e.dur, parent.end - e.ts));
      else total += e.dur;
      self.set(e.name, (self.get(e.name) ?? 0) + e.dur);
      stack.push({ name: e.name, end: e.ts + e.dur });
    }
    const perS = (us) => +((us / 1000) * (1000 / traceMs)).toFixed(1);
    const top = [...self].filter(([, us]) => us > 0).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([name, us]) => `${name} ${perS(us)}`);
    out.push({ thread: names.get(k) ?? k, busyMsPerS: perS(total), top });
  }
  return out.sort((a, b) => b.busyMsPerS - a.busyMsPerS).slice(0, 6);
}

/** From launching `sextant serve` to its first display frame with data, through the
 *  WebSocket door a page uses (connect as soon as it listens, then `io.connect`). */
async function serveStartup() {
  const t0 = Date.now();
  const proc = start("bench-startup", sextantBin, ["serve", "--http-port", "0", "--ui", uiDir, "--project", projectPath, "--data-dir", join(dir, "startup")]);
  const url = await waitFor("sextant serve's address", () => readFileSync(proc.log, "utf8").match(/Sextant UI on (http:\/\/\S+)/)?.[1], 15000, 2);
  const listening = Date.now() - t0;
  const u = new URL(url);
  const ws = new WebSocket(`ws://${u.host}/ws`);
  ws.binaryType = "arraybuffer";
  await new Promise((r, e) => ((ws.onopen = r), (ws.onerror = e)));
  const first = new Promise((r) => {
    ws.onmessage = (m) => {
      // A display frame whose header counts parsed frames (bytes 32..40) above zero.
      if (typeof m.data !== "string" && new DataView(m.data).getBigUint64(32, true) > 0n) r(Date.now());
    };
  });
  ws.send(JSON.stringify({ type: "auth", id: 0, token: u.searchParams.get("token") }));
  ws.send(JSON.stringify({ type: "display", id: 1, refreshHz: 60, points: 1000, timeRangeS: 10, raw: {}, windows: {}, console: false }));
  ws.send(JSON.stringify({ type: "command", id: 2, command: "io.connect" }));
  const firstFrame = (await first) - t0;
  ws.close();
  proc.stop();
  return { listeningMs: listening, firstDisplayFrameMs: firstFrame };
}

/** The same dashboard in the desktop app's own webview (WebKitGTK) under Xvfb. */
async function benchWebview() {
  requireFile(desktopBin, "build it with `cargo build --release -p sextant-desktop` and set SEXTANT_DESKTOP_BIN");
  requireProgram("WebKitWebDriver", "webkit2gtk-driver");
  const x = await xvfb();
  // Start-up first, launched as a person launches it, each way three times: the first
  // launch reads the program and its libraries from disk, the later ones from the cache.
  // - "bare": an X server and nothing else, as on this test machine. The app's toolkit
  //   then starts a session bus for itself (X11 autolaunch) and the accessibility bus.
  // - "desktop": both buses already running, as in any desktop session.
  // Each way, launched directly (nothing attached: the time is the app's own log line), then
  // through the WebDriver, which also says where the time went but decides itself when the
  // page starts loading.
  const bare = await launchRuns(x.display, {}, 3);
  const bareDriven = await startupRuns(x.display, {}, 3);
  const bus = await sessionBus(x.display);
  let desktop, desktopDriven;
  try {
    desktop = await launchRuns(x.display, { DBUS_SESSION_BUS_ADDRESS: bus.address }, 3);
    desktopDriven = await startupRuns(x.display, { DBUS_SESSION_BUS_ADDRESS: bus.address }, 3);
  } finally {
    bus.stop();
  }
  const { wd, driver } = await desktopDriver(x.display, {});
  try {
    await wd.open({ "tauri:options": { application: desktopBin, args: [projectPath, "--connect"] } });
    await waitFor("a first drawn frame", () => wd.exec("return window.__sextantStats?.firstDrawnAt || 0"), 30000, 20);
    const pid = await waitFor("the app's process", () => findDescendant(driver.child.pid, desktopBin), 5000);
    // The bench's view settings, then the same measurement as in Chromium.
    await wd.exec(`localStorage.setItem("sextant.settings", ${JSON.stringify(JSON.stringify(viewSettings))}); location.reload();`);
    await waitFor(`${plots} plots`, async () => (await wd.exec('return document.querySelectorAll(\'[data-testid="widget"] canvas\').length')) >= plots, 30000, 200);
    await sleep(3000);
    const web = findDescendant(pid, "WebKitWebProcess");
    const read = () => wd.exec("return { ...window.__sextantStats, t: performance.now() }");
    const c0 = cpuTicks(pid), w0 = web ? cpuTicks(web) : 0;
    const d0 = await read();
    const t0 = Date.now();
    await sleep(seconds * 1000);
    const d1 = await read();
    const c1 = cpuTicks(pid), w1 = web ? cpuTicks(web) : 0;
    const wall = (Date.now() - t0) / 1000;
    const drawn = d1.drawnFrames - d0.drawnFrames;
    const perFrame = (ms) => +(ms / Math.max(1, drawn)).toFixed(2);
    const result = {
      engine: "WebKitGTK (the desktop app's webview, Xvfb)",
      plots, pointsPerPlot: points, simulatorRateHz: rate, seconds: wall,
      dashboardFps: +((drawn * 1000) / (d1.t - d0.t)).toFixed(1),
      displayFramesPerS: +(((d1.framesReceived - d0.framesReceived) * 1000) / (d1.t - d0.t)).toFixed(1),
      appCpuPercent: +((((c1 - c0) / hz) / wall) * 100).toFixed(1),
      webProcessCpuPercent: web ? +((((w1 - w0) / hz) / wall) * 100).toFixed(1) : null,
      budget: {
        decodeMs: perFrame(d1.decodeMs - d0.decodeMs),
        drawMs: perFrame(d1.drawMs - d0.drawMs),
        frameMs: perFrame(d1.t - d0.t),
        displayBytesPerFrame: Math.round((d1.bytesReceived - d0.bytesReceived) / Math.max(1, d1.framesReceived - d0.framesReceived)),
      },
      desktopStartup: { bare, desktop },
      desktopStartupThroughDriver: { bare: bareDriven, desktop: desktopDriven },
    };
    console.log(JSON.stringify(result, null, 2));
    writeFileSync(join(artifacts, "bench-ui-webview.json"), JSON.stringify(result, null, 2));
    await wd.screenshot("bench-ui-webview.png");
  } finally {
    await wd.close();
    driver.stop();
    x.stop();
  }
  process.exit(0);
}

/** tauri-driver on `display`, with `extraEnv` in the environment the app is launched in. */
async function desktopDriver(display, extraEnv) {
  const tauriDriver = requireProgram("tauri-driver", "none: `cargo install tauri-driver --locked`");
  const port = 4900 + Math.floor(Math.random() * 90);
  const env = { ...process.env, DISPLAY: display, XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config"), ...extraEnv };
  const driver = start(`bench-tauri-driver-${port}`, tauriDriver, ["--port", String(port), "--native-port", String(port + 1)], { env });
  const wd = new WebDriver(`http://127.0.0.1:${port}`);
  await waitFor("tauri-driver", () => fetch(`http://127.0.0.1:${port}/status`).then((r) => r.ok), 15000);
  return { wd, driver };
}

/** Launches the app as a person does, with the bench's project and `--connect`, `runs`
 *  times, each until its log says the page drew its first frame with data (the page tells
 *  the app, which logs the time since it started): how long from the launch until that line
 *  appeared, and the app's own figure, since its `main` began. */
async function launchRuns(display, extraEnv, runs) {
  const env = { ...process.env, DISPLAY: display, XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config"), ...extraEnv };
  const line = /the first frame with device data was drawn (\d+) ms after the app started(?: \(the page's part: (\d+) ms\))?/;
  const times = [];
  for (let i = 0; i < runs; i++) {
    const launched = Date.now();
    const app = start(`bench-launch-${i}`, desktopBin, [projectPath, "--connect"], { env });
    try {
      const logged = await waitFor("the app's first drawn frame in its log", () => readFileSync(app.log, "utf8").match(line), 30000, 2);
      times.push({ ms: Date.now() - launched, sinceMainMs: Number(logged[1]), pageMs: Number(logged[2]) });
    } finally {
      app.stop();
    }
    // One instance at a time: a second launch would hand its project to the first and exit.
    await waitFor("the app to exit", () => !isRunning(app.child.pid), 10000);
  }
  return times;
}

/** Whether `pid` is a live process (not a zombie). */
function isRunning(pid) {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].startsWith("Z");
  } catch {
    return false;
  }
}

/** Launches the app with the bench's project and `--connect` `runs` times, each until the
 *  page has drawn a frame with data, and says how long each took from the process's start,
 *  and where the time went: until the webview began loading the page, the page's script
 *  (to DOMContentLoaded), and from there to the first frame drawn. */
async function startupRuns(display, extraEnv, runs) {
  const { wd, driver } = await desktopDriver(display, extraEnv);
  const times = [];
  try {
    for (let i = 0; i < runs; i++) {
      await wd.open({ "tauri:options": { application: desktopBin, args: [projectPath, "--connect"] } });
      const firstDrawnAt = await waitFor("a first drawn frame", () => wd.exec("return window.__sextantStats?.firstDrawnAt || 0"), 30000, 20);
      const pid = await waitFor("the app's process", () => findDescendant(driver.child.pid, desktopBin), 5000);
      const started = startedAt(pid);
      const nav = await wd.exec(`const n = performance.getEntriesByType("navigation")[0];
        return { origin: performance.timeOrigin, dcl: n ? n.domContentLoadedEventEnd : 0 };`);
      times.push({
        ms: Math.round(firstDrawnAt - started),
        processToPageLoadMs: Math.round(nav.origin - started),
        pageScriptMs: Math.round(nav.dcl),
        scriptToFirstFrameMs: Math.round(firstDrawnAt - nav.origin - nav.dcl),
      });
      await wd.close();
      // One instance at a time: a second launch would hand its project to the first and exit.
      await waitFor("the app to exit", () => !findDescendant(driver.child.pid, desktopBin), 10000);
    }
  } finally {
    await wd.close();
    driver.stop();
  }
  return times;
}

/** A session bus, with the accessibility bus started on it, as a desktop session has. */
async function sessionBus(display) {
  requireProgram("dbus-daemon", "dbus");
  const socket = join(dir, "session-bus");
  const address = `unix:path=${socket}`;
  const daemon = start("bench-session-bus", "dbus-daemon", ["--session", "--nofork", `--address=${address}`]);
  await waitFor("the session bus", () => existsSync(socket), 5000);
  const env = { ...process.env, DISPLAY: display, DBUS_SESSION_BUS_ADDRESS: address };
  const a11y = spawnSync("dbus-send", ["--session", "--print-reply", "--dest=org.a11y.Bus", "/org/a11y/bus", "org.a11y.Bus.GetAddress"], { env, encoding: "utf8" });
  if (a11y.status !== 0) throw new Error(`the accessibility bus did not start: ${a11y.stderr}`);
  return { address, stop: daemon.stop };
}

/** The pid of a process descending from `ancestor` whose program is `cmd`, or 0. */
function findDescendant(ancestor, cmd) {
  const parentOf = (p) => Number(readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")[1]);
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const program = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0")[0];
      if (program !== cmd && !program.endsWith(`/${cmd}`)) continue;
      for (let p = Number(d), i = 0; i < 20 && p > 1; i++, p = parentOf(p)) if (p === ancestor) return Number(d);
    } catch {
      // The process ended while we looked.
    }
  }
  return 0;
}
