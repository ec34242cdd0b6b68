// The whole stack for an hour: the simulator at 100 000 frames/s through a release `sextant
// serve` with a 16-plot dashboard open in Chromium, recording to a session and exporting
// CSV. Samples the resident memory of every process once a minute, and the CPU each one
// (and each of the backend's threads) used in that minute, and prints the curve; writes
// target/e2e/soak.json.
//
//   node ui/e2e/soak.mjs [--minutes 60] [--rate 100000] [--every 60] [--rotate 180]
//
// Disk: an hour at 100 000 frames/s is ~70 GB of sessions (~1.2 GB a minute) and ~40 GB of
// CSV. The soak keeps it bounded: every 3 minutes recording moves to a new sessions
// database file and the finished file is removed (deleting a session inside one database
// frees no disk: SQLite keeps the pages, and the delete's WAL grows as large), and the CSV
// file is emptied at each sample (truncated in place – the export keeps writing at its
// offset into a sparse file). Neither is what is measured; what is measured is whether
// anything grows.
import { readFileSync, readdirSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { artifacts, loadProject, pageCommand, repo, requireProgram, servedUrl, sextantBin, sleep, start, tempDir, waitFor } from "./harness.mjs";

const arg = (name, d) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};
const minutes = arg("minutes", 60), rate = arg("rate", 100000), everyS = arg("every", 60);
const ROTATE_S = arg("rotate", 180);

const dir = tempDir("sextant-soak-");
const projectPath = join(dir, "soak.json");
writeFileSync(projectPath, JSON.stringify(loadProject({ plots: 16, rate })));
const csvPath = join(dir, "soak.csv");

const port = 8000 + Math.floor(Math.random() * 90);
const server = start("soak-serve", sextantBin, [
  "serve", "--http-port", String(port), "--ui", join(repo, "ui/dist"), "--project", projectPath,
  "--data-dir", join(dir, "assistant"), "--allow-folder", dir,
], { cwd: dir });
const url = await servedUrl(server);
const browser = await chromium.launch({
  executablePath: requireProgram("chromium", "chromium"),
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
});
const page = await (await browser.newContext({ viewport: { width: 1600, height: 1000 } })).newPage();
await page.addInitScript(() => localStorage.setItem("sextant.settings", JSON.stringify({ theme: "light", language: "en", refreshHz: 60, points: 10000, timeRangeS: 10 })));
await page.goto(url);
await page.waitForSelector(".shell");

/** One command through the page's own WebSocket door, approved as the page's person. */
const call = (command, params = {}) => pageCommand(page, command, params);

let db = 0;
const dbPath = (k) => join(dir, `sessions-${k}.sqlite`);
await call("sessions.setDatabase", { path: dbPath(db) });
await call("csvExport.enable", { path: csvPath });
await call("io.connect");
await call("sessions.startRecording", { title: "soak" });
let rotatedAt = Date.now();
await waitFor("16 drawn plots", async () => (await page.locator('[data-testid="widget"] canvas').count()) >= 16, 20000);

const rssKiB = (pid) => {
  try {
    return Number(readFileSync(`/proc/${pid}/status`, "utf8").match(/^VmRSS:\s+(\d+)/m)[1]);
  } catch {
    return 0;
  }
};
/** A process's resident MiB by kind: anonymous, file-backed, shared memory. */
function rssKinds(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const mib = (key) => Math.round(Number(status.match(new RegExp(`^${key}:\\s+(\\d+)`, "m"))?.[1] ?? 0) / 1024);
    return { anon: mib("RssAnon"), file: mib("RssFile"), shmem: mib("RssShmem") };
  } catch {
    return {};
  }
}
/** Every process of the run, by role: the backend, and Chromium's by their --type. */
function processPids() {
  const roles = { backend: [server.child.pid] };
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    let cmd;
    try {
      cmd = readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0");
    } catch {
      continue;
    }
    if (!/chrom/.test(cmd[0] ?? "")) continue;
    const pid = Number(d);
    let p = pid, ours = false;
    for (let i = 0; i < 10 && p > 1; i++) {
      if (p === process.pid) ours = true; // Chromium is this script's child
      try {
        p = Number(readFileSync(`/proc/${p}/stat`, "utf8").split(") ")[1].split(" ")[1]);
      } catch {
        break;
      }
    }
    if (!ours) continue;
    // Chromium rewrites its children's command lines into one string: look for the flag in it.
    const type = cmd.join(" ").match(/--type=(\S+)/)?.[1] ?? "browser";
    (roles[`chromium-${type}`] ??= []).push(pid);
  }
  return roles;
}
/** Resident MiB of every process of the run, by role. */
function processes() {
  return Object.fromEntries(Object.entries(processPids()).map(([k, pids]) => [k, Math.round(pids.reduce((n, p) => n + rssKiB(p), 0) / 1024)]));
}

/** Resident MiB of a process's five largest anonymous mappings, largest first (the main
 * thread's heap, `[heap]`, counts: with arenas capped, other threads allocate there too). */
function arenas(pid) {
  try {
    const sizes = [];
    let anonymous = false;
    for (const line of readFileSync(`/proc/${pid}/smaps`, "utf8").split("\n")) {
      const head = line.match(/^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+(\s+(\S+))?/);
      if (head) anonymous = !head[2] || head[2] === "[heap]";
      else if (anonymous && line.startsWith("Rss:")) sizes.push(Number(line.split(/\s+/)[1]) / 1024);
    }
    return sizes.sort((a, b) => b - a).slice(0, 5).map((x) => +x.toFixed(1));
  } catch {
    return [];
  }
}

/** CPU time (s) a process has used, and that of its threads summed by thread name. */
function cpuTimes(pid) {
  const ticks = (stat) => {
    const f = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / 100; // utime + stime, in USER_HZ (100)
  };
  const threads = {};
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const name = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(") "));
        threads[name] = (threads[name] ?? 0) + ticks(stat);
      } catch {}
    }
    return { total: ticks(readFileSync(`/proc/${pid}/stat`, "utf8")), threads };
  } catch {
    return { total: 0, threads };
  }
}
/** Per cent of one core each role (and each of the backend's busiest thread names) used
 * between two readings: where the machine's two cores went in that minute. */
function cpuShare(before, after, seconds) {
  const pct = (a, b) => +(((a - (b ?? 0)) / seconds) * 100).toFixed(1);
  const roles = Object.fromEntries(Object.keys(after.roles).map((r) => [r, pct(after.roles[r], before.roles[r])]));
  const threads = Object.entries(after.backendThreads)
    .map(([n, t]) => [n, pct(t, before.backendThreads[n])])
    .filter(([, p]) => p >= 1)
    .sort((a, b) => b[1] - a[1]);
  return { roles, backendThreads: Object.fromEntries(threads) };
}
/** CPU seconds so far of every process of the run, by role, and the backend's by thread. */
function cpuReading() {
  const roles = {};
  for (const [role, pids] of Object.entries(processPids())) roles[role] = pids.reduce((n, p) => n + cpuTimes(p).total, 0);
  return { at: Date.now(), roles, backendThreads: cpuTimes(server.child.pid).threads };
}

const samples = [];
const t0 = Date.now();
let rotations = 0;
const recordings = [];
const status = () => call("io.status");
const stats = () =>
  page.evaluate(() => ({ ...window.__sextantStats, t: performance.now(), jsHeap: performance.memory?.usedJSHeapSize ?? null }));
let lastStats = await stats();
let lastCpu = cpuReading();
for (let k = 0; ; k++) {
  const s = await status();
  const now = await stats();
  const fps = +(((now.drawnFrames - lastStats.drawnFrames) * 1000) / Math.max(1, now.t - lastStats.t)).toFixed(1);
  lastStats = now;
  const csv = await call("csvExport.status");
  const cpu = cpuReading();
  const cpuPercent = cpuShare(lastCpu, cpu, Math.max(1, cpu.at - lastCpu.at) / 1000);
  lastCpu = cpu;
  const sample = {
    minute: +((Date.now() - t0) / 60000).toFixed(2),
    rssMiB: processes(),
    // The backend's largest anonymous mappings (its allocator's arenas, one per busy
    // thread): which of them grows says which thread's memory it is.
    backendArenasMiB: arenas(server.child.pid),
    // Which kind of memory it is: the process's own (anonymous) or file pages mapped in.
    backendRssKindMiB: rssKinds(server.child.pid),
    frames: s.sources.reduce((n, x) => n + x.frames, 0),
    droppedChunks: s.sources.reduce((n, x) => n + x.droppedChunks, 0),
    csvRows: csv.rows ?? null,
    csvDroppedRows: csv.droppedRows ?? null,
    dashboardFps: fps,
    // The renderers' memory by kind: its own heaps (anonymous) against the shared memory
    // it draws into for the compositor – which of them grows, if one does.
    rendererRssKindMiB: (processPids()["chromium-renderer"] ?? [])
      .map(rssKinds)
      .reduce((sum, k) => ({ anon: sum.anon + (k.anon ?? 0), file: sum.file + (k.file ?? 0), shmem: sum.shmem + (k.shmem ?? 0) }), { anon: 0, file: 0, shmem: 0 }),
    // The page's live JavaScript objects (Chromium's own count): whether what the renderer
    // holds is the page's objects or the rest (canvases, the compositor's tiles).
    rendererJsHeapMiB: now.jsHeap == null ? null : +(now.jsHeap / 1048576).toFixed(1),
    // Per cent of one core since the last sample (the machine has two): which work had the
    // cores when a writer fell behind.
    cpuPercent,
  };
  samples.push(sample);
  console.log(JSON.stringify(sample));
  if (Date.now() - t0 >= minutes * 60000) break;
  // Bounded disk, as described at the top.
  try {
    truncateSync(`${csvPath}.partial`, 0);
  } catch {}
  if (Date.now() - rotatedAt >= ROTATE_S * 1000) {
    const began = Date.now();
    recordings.push({ ...(await call("sessions.stopRecording")).session, stopMs: Date.now() - began });
    await call("sessions.setDatabase", { path: dbPath(++db) });
    await call("sessions.startRecording", { title: "soak" });
    for (const end of ["", "-wal", "-shm"]) rmSync(dbPath(db - 1) + end, { force: true });
    rotations++;
    rotatedAt = Date.now();
  }
  await sleep(Math.max(0, t0 + (k + 1) * everyS * 1000 - Date.now()));
}
recordings.push((await call("sessions.stopRecording")).session);
await call("io.disconnect");

// Flatness: each process's RSS from minute 5 on, as the spread around its mean.
const settled = samples.filter((s) => s.minute >= Math.min(5, minutes / 2));
const flat = {};
for (const role of Object.keys(samples.at(-1).rssMiB)) {
  const xs = settled.map((s) => s.rssMiB[role]).filter((x) => x > 0);
  if (!xs.length) continue;
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  flat[role] = { minMiB: Math.min(...xs), maxMiB: Math.max(...xs), spreadPercent: +(((Math.max(...xs) - Math.min(...xs)) / 2 / mean) * 100).toFixed(1) };
}
const last = samples.at(-1);
const result = {
  minutes, simulatorRateHz: rate, samples,
  framesPerS: Math.round((last.frames - samples[0].frames) / ((last.minute - samples[0].minute) * 60 || 1)),
  droppedChunks: last.droppedChunks,
  csvDroppedRows: last.csvDroppedRows,
  // Each recording's frames, and what it dropped (recording is 1 of the 3 consumers).
  recordings,
  recordingDroppedFrames: recordings.reduce((n, r) => n + (r?.droppedFrames ?? 0), 0),
  rotations,
  flatAfterSettling: flat,
};
console.log("\nRSS (MiB) per minute:");
const roles = Object.keys(flat);
console.log(["min", ...roles].join("\t"));
for (const s of samples) console.log([s.minute, ...roles.map((r) => s.rssMiB[r] ?? "")].join("\t"));
console.log(JSON.stringify({ ...result, samples: undefined }, null, 2));
writeFileSync(join(artifacts, "soak.json"), JSON.stringify(result, null, 2));
await browser.close();
server.stop();
// Gigabytes of sessions and CSV: nothing in them is the result (that is soak.json).
if (server.child.exitCode === null) await Promise.race([new Promise((r) => server.child.once("exit", r)), sleep(10000)]);
rmSync(dir, { recursive: true, force: true });
process.exit(0);
