// The packages as a person gets them (`./dev package-test`, after `./dev package`): the
// .deb installed by apt, and the AppImage run where it lies. From the installed paths:
// the command-line tool answers, runs the demo device and serves the page; the search
// model is found beside the program; the programs carry no line tables; and the desktop
// app starts under Xvfb, connects a project and draws its first frame with data – the time
// from the process starting to that frame is reported. Every check fails the script: a
// missing program, a page not served, a frame never drawn.
//
//   node --experimental-websocket ui/e2e/packages.mjs --appimage PATH [--prefix /usr]

import { execFileSync } from "node:child_process";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  WebDriver, artifacts, loadProject, requireFile, requireProgram, servedUrl, sleep, start, tempDir, waitFor, xvfb,
} from "./harness.mjs";

const flag = (name) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const appimage = flag("appimage");
const prefix = flag("prefix") ?? "/usr";
if (!appimage) throw new Error("usage: packages.mjs --appimage PATH [--prefix /usr]");
requireFile(appimage, "build it with ./dev package");
const version = JSON.parse(readFileSync(new URL("../../src-tauri/tauri.conf.json", import.meta.url), "utf8")).version;

const dir = tempDir("sextant-packages-");
const home = { XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config"), HOME: dir };
const projectPath = join(dir, "demo.json");
writeFileSync(projectPath, JSON.stringify(loadProject({ plots: 4, rate: 1000 })));
const extractAndRun = { APPIMAGE_EXTRACT_AND_RUN: "1" };

function check(what, ok, detail = "") {
  if (!ok) throw new Error(`${what}${detail ? `: ${detail}` : ""}`);
  console.log(`ok  ${what}`);
}

function run(program, args, env = {}) {
  return execFileSync(program, args, { env: { ...process.env, ...home, ...env }, encoding: "utf8", timeout: 120000 });
}

function sections(program) {
  return execFileSync("readelf", ["-S", "-W", program], { encoding: "utf8" });
}

const mib = (path) => +(statSync(path).size / 2 ** 20).toFixed(1);

/** Starts `application` (with `env`) through tauri-driver on the demo project, connected,
 *  and returns the ms from asking the driver for it to the first frame with data drawn
 *  (the driver's own start-up included: an upper bound on what a person waits). */
async function desktopStartup(application, env = {}) {
  const tauriDriver = requireProgram("tauri-driver", "none: `cargo install tauri-driver --locked`");
  requireProgram("WebKitWebDriver", "webkit2gtk-driver");
  const x = await xvfb();
  const port = 4800 + Math.floor(Math.random() * 90);
  const driver = start("packages-tauri-driver", tauriDriver, ["--port", String(port), "--native-port", String(port + 1)], {
    env: { ...process.env, ...home, ...env, DISPLAY: x.display },
  });
  const wd = new WebDriver(`http://127.0.0.1:${port}`);
  try {
    await waitFor("tauri-driver", () => fetch(`http://127.0.0.1:${port}/status`).then((r) => r.ok), 15000);
    const opened = Date.now();
    await wd.open({ "tauri:options": { application, args: [projectPath, "--connect"] } });
    // An AppImage run without a mount unpacks itself first: give it time.
    const firstDrawnAt = await waitFor("a first frame with data drawn", () => wd.exec("return window.__sextantStats?.firstDrawnAt || 0"), 120000, 20);
    return Math.round(firstDrawnAt - opened);
  } finally {
    await wd.close().catch(() => {});
    driver.stop();
    x.stop();
  }
}

const result = { version, deb: {}, appimage: { path: appimage, mib: mib(appimage) } };

// The .deb, installed.
const cli = join(prefix, "bin/sextant");
const desktop = join(prefix, "bin/sextant-desktop");
requireFile(cli, "install the .deb first (./dev package-test does)");
requireFile(desktop, "install the .deb first (./dev package-test does)");
check("the installed CLI says its version", run(cli, ["--version"]).includes(version));
const demo = run(cli, ["demo", "--seconds", "1", "--max"]);
check("the installed CLI runs the demo device", /frames/i.test(demo), demo.slice(0, 200));
/** The folder `sextant models status` says the model is used from, when it was installed
 *  with the program. */
const modelUsed = (status) => status.match(/^used\s+installed with Sextant\s+(\S+)/m)?.[1];
const models = run(cli, ["models", "status"]);
check("the installed CLI uses the model installed beside it", modelUsed(models)?.startsWith(join(prefix, "share/sextant/")), models);
for (const program of [cli, desktop]) {
  check(`${program} carries no line tables`, !/\.debug_line\b/.test(sections(program)));
}
result.deb.cliMiB = mib(cli);
result.deb.desktopMiB = mib(desktop);
const serve = start("packages-serve", cli, ["serve", "--http-port", String(7800 + Math.floor(Math.random() * 90)), "--data-dir", join(dir, "serve")], {
  env: { ...process.env, ...home },
});
try {
  const url = await servedUrl(serve);
  const page = await (await fetch(url)).text();
  check("the installed `sextant serve` serves the page it was installed with", /<script[^>]+src=/.test(page));
} finally {
  serve.stop();
}
result.deb.desktopFirstFrameMs = await desktopStartup(desktop);
result.deb.desktopFirstFrameAgainMs = await desktopStartup(desktop);
check("the installed desktop app starts, connects and draws", result.deb.desktopFirstFrameMs > 0);

// The AppImage, run where it lies. This machine's tests run without FUSE mounts, so the
// runtime unpacks the image and runs it (--appimage-extract-and-run) – slower to start
// than a mount, and reported as such.
check("the AppImage's CLI says its version", run(appimage, ["cli", "--version"], extractAndRun).includes(version));
const fromImage = run(appimage, ["cli", "demo", "--seconds", "1", "--max"], extractAndRun);
check("the AppImage's CLI runs the demo device", /frames/i.test(fromImage), fromImage.slice(0, 200));
const imageModels = run(appimage, ["cli", "models", "status"], extractAndRun);
const inside = modelUsed(imageModels);
check("the AppImage's CLI uses the model inside it, not the .deb's", !!inside && !inside.startsWith(`${prefix}/`), imageModels);
result.appimage.desktopFirstFrameMs = await desktopStartup(appimage, extractAndRun);
check("the AppImage's desktop app starts, connects and draws", result.appimage.desktopFirstFrameMs > 0);

console.log(JSON.stringify(result, null, 2));
writeFileSync(join(artifacts, "packages.json"), JSON.stringify(result, null, 2));
await sleep(0);
process.exit(0);
