// Real parts for the end-to-end tests: pty pairs (socat), Xvfb, the built binaries, a
// plain WebDriver client for tauri-driver, and where artifacts go. A missing component
// fails loudly: these tests never skip.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const targetDir = process.env.CARGO_TARGET_DIR || join(repo, "target");
export const sextantBin = process.env.SEXTANT_BIN || join(targetDir, "debug/sextant");
export const desktopBin = process.env.SEXTANT_DESKTOP_BIN || join(targetDir, "debug/sextant-desktop");
/** Screenshots and logs: kept as CI artifacts, never committed. */
export const artifacts = process.env.SEXTANT_ARTIFACTS || join(repo, "target/e2e");
mkdirSync(artifacts, { recursive: true });

export function requireFile(path, hint) {
  if (!existsSync(path)) throw new Error(`${path} is missing: ${hint}`);
  return path;
}

export function requireProgram(name, pkg) {
  const r = spawnSync("sh", ["-c", `command -v ${name}`]);
  if (r.status !== 0) throw new Error(`${name} is not installed (apt package ${pkg}); ./dev test installs it`);
  return r.stdout.toString().trim();
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(what, fn, timeoutMs = 20000, everyMs = 100) {
  const until = Date.now() + timeoutMs;
  let last;
  while (Date.now() < until) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await sleep(everyMs);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${last.message}` : ""}`);
}

const children = new Set();
process.on("exit", () => {
  for (const c of children) {
    try {
      process.kill(-c.pid, "SIGKILL");
    } catch {}
  }
});

/** Starts a program in its own process group, logging to artifacts/NAME.log. */
export function start(name, cmd, args, opts = {}) {
  const logPath = join(artifacts, `${name}.log`);
  const log = openSync(logPath, "w");
  const child = spawn(cmd, args, { ...opts, detached: true, stdio: ["ignore", log, log] });
  children.add(child);
  child.on("exit", () => children.delete(child));
  return {
    child,
    log: logPath,
    stop() {
      try {
        process.kill(-child.pid, "SIGTERM");
      } catch {}
      children.delete(child);
    },
  };
}

export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A pty pair: the app opens `a`; the test reads and writes `b`. */
export async function ptyPair(dir) {
  requireProgram("socat", "socat");
  const a = join(dir, "ttyA");
  const b = join(dir, "ttyB");
  const proc = start(`socat-${Date.now()}`, "socat", ["-d", "-d", `pty,raw,echo=0,link=${a}`, `pty,raw,echo=0,link=${b}`]);
  await waitFor("the pty pair", () => existsSync(a) && existsSync(b), 5000);
  return { a, b, stop: proc.stop };
}

/** Starts reading a pty (the peer of what the app opened); `until` waits for a pattern. */
export function listen(path) {
  const cat = spawn("cat", [path]);
  children.add(cat);
  let got = "";
  cat.stdout.on("data", (d) => (got += d.toString("latin1")));
  return {
    /** Waits for `pattern` among the bytes read at or after `from` (a `mark()`). */
    until: (pattern, timeoutMs = 15000, from = 0) =>
      waitFor(`"${pattern}" on ${path} (got ${JSON.stringify(got.slice(-200))})`, () => got.indexOf(pattern, from) >= 0 && got, timeoutMs),
    /** Where the bytes read so far end, for `until` to look only at what comes next. */
    mark: () => got.length,
    /** How many times `text` was read so far. */
    count: (text) => got.split(text).length - 1,
    stop() {
      cat.kill();
      children.delete(cat);
    },
  };
}

/** Writes lines to a pty every `everyMs` until stopped. */
export function feed(path, lineAt, everyMs = 20) {
  const fd = openSync(path, "w");
  let i = 0;
  const timer = setInterval(() => {
    try {
      writeFileSync(fd, lineAt(i++));
    } catch {}
  }, everyMs);
  return () => {
    clearInterval(timer);
    closeSync(fd);
  };
}

/** The demo project as JSON, from the CLI (the same one the app opens on first run). */
export function demoProject() {
  const r = spawnSync(sextantBin, ["demo", "--print-project"]);
  if (r.status !== 0) throw new Error(`sextant demo --print-project failed: ${r.stderr}`);
  return JSON.parse(r.stdout.toString());
}

/** The benchmarks' project: the simulator at `rate` frames/s with `plots` sine channels
 *  (noise on each), every channel its own plot tile, four to a row. */
export function loadProject({ plots = 16, rate = 100000 } = {}) {
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
  return project;
}

export async function xvfb() {
  requireProgram("Xvfb", "xvfb");
  const display = `:${90 + Math.floor(Math.random() * 9)}`;
  const proc = start(`xvfb${display.slice(1)}`, "Xvfb", [display, "-screen", "0", "1400x900x24", "-nolisten", "tcp"]);
  await waitFor("Xvfb", () => existsSync(`/tmp/.X11-unix/X${display.slice(1)}`), 5000);
  return { display, stop: proc.stop };
}

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

/** Just enough of the W3C WebDriver protocol, over fetch. */
export class WebDriver {
  constructor(base) {
    this.base = base;
    this.sid = null;
  }
  async req(method, path, body) {
    const r = await fetch(this.base + path, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const j = await r.json().catch(() => ({}));
    if (!r.ok || j?.value?.error) {
      throw new Error(`${method} ${path}: ${j?.value?.error ?? r.status}: ${j?.value?.message ?? ""}`);
    }
    return j.value;
  }
  s(path) {
    return `/session/${this.sid}${path}`;
  }
  async open(capabilities) {
    const v = await this.req("POST", "/session", { capabilities: { alwaysMatch: capabilities } });
    this.sid = v.sessionId;
  }
  async find(css) {
    const v = await this.req("POST", this.s("/element"), { using: "css selector", value: css });
    return v[ELEMENT];
  }
  async findAll(css) {
    const v = await this.req("POST", this.s("/elements"), { using: "css selector", value: css });
    return v.map((e) => e[ELEMENT]);
  }
  async waitFind(css, timeoutMs = 20000) {
    return waitFor(`element ${css}`, () => this.find(css), timeoutMs, 200);
  }
  click(el) {
    return this.req("POST", this.s(`/element/${el}/click`), {});
  }
  type(el, text) {
    return this.req("POST", this.s(`/element/${el}/value`), { text });
  }
  text(el) {
    return this.req("GET", this.s(`/element/${el}/text`));
  }
  attr(el, name) {
    return this.req("GET", this.s(`/element/${el}/attribute/${name}`));
  }
  exec(script, args = []) {
    return this.req("POST", this.s("/execute/sync"), { script, args });
  }
  async screenshot(file) {
    const png = Buffer.from(await this.req("GET", this.s("/screenshot")), "base64");
    if (file) writeFileSync(join(artifacts, file), png);
    return png;
  }
  async elementScreenshot(el) {
    return Buffer.from(await this.req("GET", this.s(`/element/${el}/screenshot`)), "base64");
  }
  async close() {
    if (this.sid) await this.req("DELETE", this.s("")).catch(() => {});
    this.sid = null;
  }
}

/** In-page: a fingerprint of a canvas's pixels and how many are drawn (not transparent). */
export const CANVAS_PIXELS = `
  const c = arguments[0] ? document.querySelector(arguments[0]) : null;
  if (!c) return null;
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let drawn = 0, hash = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] !== 0) drawn++;
    hash = (Math.imul(hash, 31) + d[i] + 3 * d[i + 1] + 7 * d[i + 2] + 11 * d[i + 3]) | 0;
  }
  return { drawn, total: d.length / 4, hash, pixels: Array.from(d.filter((_, i) => i % 97 === 0)) };
`;

/** Share of sampled pixels that differ between two CANVAS_PIXELS results. */
export function changedShare(a, b) {
  const n = Math.min(a.pixels.length, b.pixels.length);
  let changed = 0;
  for (let i = 0; i < n; i++) if (a.pixels[i] !== b.pixels[i]) changed++;
  return changed / Math.max(1, n);
}

/** Decodes an 8-bit, non-interlaced RGB/RGBA PNG (what WebDriver screenshots are). */
export function decodePng(buf) {
  const { inflateSync } = require("node:zlib");
  if (buf.readUInt32BE(0) !== 0x89504e47) throw new Error("not a PNG");
  let at = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (at < buf.length) {
    const len = buf.readUInt32BE(at);
    const type = buf.toString("latin1", at + 4, at + 8);
    const body = buf.subarray(at + 8, at + 8 + len);
    if (type === "IHDR") {
      width = body.readUInt32BE(0);
      height = body.readUInt32BE(4);
      const [depth, color, , , interlace] = body.subarray(8, 13);
      if (depth !== 8 || interlace !== 0 || (color !== 2 && color !== 6)) {
        throw new Error(`unsupported PNG (depth ${depth}, colour ${color}, interlace ${interlace})`);
      }
      channels = color === 6 ? 4 : 3;
    } else if (type === "IDAT") idat.push(body);
    else if (type === "IEND") break;
    at += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const out = Buffer.alloc(width * height * 4);
  let prev = Buffer.alloc(stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = Buffer.from(raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1)));
    for (let i = 0; i < stride; i++) {
      const a = i >= channels ? line[i - channels] : 0;
      const b = prev[i];
      const c = i >= channels ? prev[i - channels] : 0;
      let p = 0;
      if (filter === 1) p = a;
      else if (filter === 2) p = b;
      else if (filter === 3) p = (a + b) >> 1;
      else if (filter === 4) {
        const pa = Math.abs(b - c), pb = Math.abs(a - c), pc = Math.abs(a + b - 2 * c);
        p = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      }
      line[i] = (line[i] + p) & 0xff;
    }
    for (let x = 0; x < width; x++) {
      for (let k = 0; k < 4; k++) out[(y * width + x) * 4 + k] = k < channels ? line[x * channels + k] : 255;
    }
    prev = line;
  }
  return { width, height, data: out };
}

/** Share of pixels inside `rect` that differ between two decoded screenshots. */
export function regionChange(a, b, rect) {
  let changed = 0, total = 0;
  const x0 = Math.max(0, Math.floor(rect.x)), y0 = Math.max(0, Math.floor(rect.y));
  const x1 = Math.min(a.width, b.width, Math.ceil(rect.x + rect.width));
  const y1 = Math.min(a.height, b.height, Math.ceil(rect.y + rect.height));
  for (let y = y0; y < y1; y++) {
    for (let x = x0; x < x1; x++) {
      const i = (y * a.width + x) * 4, j = (y * b.width + x) * 4;
      total++;
      if (a.data[i] !== b.data[j] || a.data[i + 1] !== b.data[j + 1] || a.data[i + 2] !== b.data[j + 2]) changed++;
    }
  }
  return { changed, total, share: changed / Math.max(1, total) };
}

export const scriptServerBin = process.env.SEXTANT_SCRIPT_SERVER_BIN || join(targetDir, "debug/examples/script_server");

/** The scripted model provider (crates/providers, `script_server` example) replaying
 *  `fixtures/providers/<fixture>` (or a script written by the test, at an absolute path); `requests()` is what it received, bodies parsed. */
export async function scriptServer(fixture) {
  requireFile(scriptServerBin, "build it with `cargo build -p sextant-providers --features script --example script_server` (./dev test does)");
  const name = `script-server-${Date.now()}`;
  const file = isAbsolute(fixture) ? fixture : join(repo, "fixtures/providers", fixture);
  const proc = start(name, scriptServerBin, [file]);
  const url = await waitFor("the scripted provider's address", () => {
    const m = readFileSync(join(artifacts, `${name}.log`), "utf8").match(/^(http:\/\/127\.0\.0\.1:\d+)$/m);
    return m?.[1];
  }, 10000);
  return {
    url,
    requests: async () => (await fetch(`${url}/_script/requests`)).json(),
    stop: proc.stop,
  };
}

/** A widget test's stage: `project` (already in `dir`, or written there as `name`.json)
 *  served by `sextant serve` with the UI of ui/dist (or $SEXTANT_UI_DIST), and headless
 *  Chromium to open it. `stop()` ends both. */
export async function servedProject(dir, name, project) {
  const uiDist = process.env.SEXTANT_UI_DIST || join(repo, "ui/dist");
  requireFile(sextantBin, "build it with `cargo build -p sextant-cli` (./dev test does)");
  requireFile(join(uiDist, "index.html"), "build the UI with `npm run build` in ui/");
  const chrome = requireProgram("chromium", "chromium");
  mkdirSync(artifacts, { recursive: true });
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(project));
  const port = 7100 + Math.floor(Math.random() * 800);
  const server = start(`${name}-serve-${port}`, sextantBin, [
    "serve", "--http-port", String(port), "--ui", uiDist, "--data-dir", join(dir, "assistant"), "--allow-folder", dir, "--project", file,
  ], { cwd: dir });
  const url = await servedUrl(server);
  const { chromium } = require("playwright-core");
  const browser = await chromium.launch({
    executablePath: chrome,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  return {
    url,
    browser,
    async stop() {
      await browser.close();
      server.stop();
    },
  };
}

/** The address `sextant serve` printed for its UI – with this launch's secret, which the
 * page must prove before it may do anything – once the server answers on it. */
export async function servedUrl(proc) {
  const url = await waitFor(
    "the UI address on sextant serve's output",
    () => readFileSync(proc.log, "utf8").match(/Sextant UI on (http:\/\/\S+)/)?.[1],
    15000,
  );
  await waitFor("sextant serve", () => fetch(url).then((r) => r.ok), 15000);
  return url;
}

/** A page of the served UI at `url` in `theme` and `language` (and any other `settings`),
 *  its project connected, on the Dashboard: where the widget tests start. */
export async function connectedDashboard(browser, url, { theme = "light", language = "en", settings = {}, viewport = { width: 1280, height: 800 } } = {}) {
  const context = await browser.newContext({ viewport });
  await context.addInitScript((s) => localStorage.setItem("sextant.settings", JSON.stringify(s)), { ...settings, theme, language });
  const p = await context.newPage();
  p.on("pageerror", (e) => console.error("page error:", e.message));
  await p.goto(url);
  await p.waitForSelector(".shell");
  await p.click('[data-nav="connect"]');
  await p.locator('[data-screen="connect"][data-ready="true"]').waitFor();
  if (!(await p.locator('[data-testid="disconnect"]').isVisible())) await p.click('[data-testid="connect"]');
  await p.locator('[data-testid="connection-status"][data-connected="true"]').waitFor({ timeout: 10000 });
  await p.click('[data-nav="dashboard"]');
  return { context, p };
}

/** One registry command through `page`'s own WebSocket door, proving the launch's secret
 *  first and approved as the page's person: what a click in the page would run. */
export function pageCommand(page, command, params = {}) {
  return page.evaluate(async ([command, params]) => {
    const ws = new WebSocket(location.href.replace(/^http/, "ws").replace(/[^/]*$/, "ws"));
    await new Promise((r) => (ws.onopen = r));
    ws.send(JSON.stringify({ type: "auth", id: 0, token: sessionStorage.getItem("sextant.serverSecret") }));
    ws.send(JSON.stringify({ type: "command", id: 1, command, params, approved: true }));
    const m = await new Promise((r) => (ws.onmessage = (m) => JSON.parse(m.data).id === 1 && r(JSON.parse(m.data))));
    ws.close();
    if (m.error) throw new Error(`${command}: ${JSON.stringify(m.error)}`);
    return m.result;
  }, [command, params]);
}

export const postgresServerBin = process.env.SEXTANT_POSTGRES_SERVER_BIN || join(targetDir, "debug/examples/test_server");

/** A private PostgreSQL server (crates/postgres, `test_server` example: Debian's own
 *  `initdb` and `postgres` in a temporary folder, password login for `sextant`). `query(sql)`
 *  runs one statement with psql and returns its rows as arrays of text. */
export async function postgresServer() {
  requireFile(postgresServerBin, "build it with `cargo build -p sextant-postgres --features test-server --example test_server` (./dev test does)");
  requireProgram("psql", "postgresql-client");
  const name = `postgres-${Date.now()}`;
  const proc = start(name, postgresServerBin, []);
  const [port, password] = await waitFor("the PostgreSQL server's address", () => {
    const log = readFileSync(join(artifacts, `${name}.log`), "utf8");
    const url = log.match(/^postgresql:\/\/sextant@127\.0\.0\.1:(\d+)\/postgres$/m);
    const pw = log.match(/^password: (.+)$/m);
    return url && pw ? [Number(url[1]), pw[1]] : null;
  }, 60000);
  const query = (sql) =>
    execFileSync("psql", ["-X", "-A", "-t", "-F", "\t", "-h", "127.0.0.1", "-p", String(port), "-U", "sextant", "-d", "postgres", "-c", sql], {
      env: { ...process.env, PGPASSWORD: password },
      encoding: "utf8",
    })
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => l.split("\t"));
  return { port, user: "sextant", password, query, stop: proc.stop };
}
