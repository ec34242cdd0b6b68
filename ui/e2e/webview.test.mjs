// The desktop app in the real webview (WebKitGTK) under Xvfb, driven by tauri-driver:
// it starts on the demo device, a plot moves, workspaces switch, and a line typed in the
// console arrives at a real pty peer, and the assistant's chat panel streams a reply from
// the scripted provider through the app's own chat commands.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import {
  CANVAS_PIXELS, WebDriver, changedShare, decodePng, demoProject, regionChange, desktopBin, listen, ptyPair,
  requireFile, requireProgram, scriptServer, sleep, start, tempDir, waitFor, xvfb,
} from "./harness.mjs";

let x, driverProc, pty, wd, dir, provider;

before(async () => {
  requireFile(desktopBin, "build it with `cargo build -p sextant-desktop` (./dev test does)");
  requireProgram("WebKitWebDriver", "webkit2gtk-driver");
  const tauriDriver = requireProgram("tauri-driver", "none: `cargo install tauri-driver --locked`");
  dir = tempDir("sextant-webview-");
  pty = await ptyPair(dir);
  // The demo project plus a serial device on a pty, for the console.
  const project = demoProject();
  project.sources.push({
    id: "uart",
    title: "Bench UART",
    connection: { type: "serial", port: pty.a, baud: 115200 },
  });
  // A painter on a tab of its own: project code running in the webview's worker, under the
  // desktop app's own content security policy.
  project.groups.push({
    id: "sketch", title: "Sketch", widget: "painter",
    datasets: [{ id: "sketch-t", title: "T", units: "°C", index: 1, min: 0, max: 50, graph: false }],
    painterCode: "function paint(ctx, datasets, w, h) {\n  ctx.fillStyle = '#1f6feb';\n  ctx.fillRect(0, 0, w * Math.min(1, Math.max(0.1, datasets[0].value / 50)), h);\n}\n",
  });
  project.workspaces.push({ id: "ws-painter", title: "Sketch", tiles: [{ group: "sketch", x: 0, y: 0, w: 6, h: 4 }] });
  const projectPath = join(dir, "bench.json");
  writeFileSync(projectPath, JSON.stringify(project, null, 2));
  x = await xvfb();
  const port = 4500 + Math.floor(Math.random() * 400);
  driverProc = start("tauri-driver", tauriDriver, ["--port", String(port), "--native-port", String(port + 1)], {
    env: { ...process.env, DISPLAY: x.display, XDG_DATA_HOME: join(dir, "data"), XDG_CONFIG_HOME: join(dir, "config") },
  });
  wd = new WebDriver(`http://127.0.0.1:${port}`);
  await waitFor("tauri-driver", () => fetch(`http://127.0.0.1:${port}/status`).then((r) => r.ok), 15000);
  await wd.open({ "tauri:options": { application: desktopBin, args: [projectPath, "--connect"] } });
});

after(async () => {
  provider?.stop();
  await wd?.screenshot("webview-last.png").catch(() => {});
  await wd?.close();
  driverProc?.stop();
  pty?.stop();
  x?.stop();
});

test("starts on the demo device and a plot shows moving data", async () => {
  const plot = '[data-testid="widget"][data-widget-kind="multiplot"] canvas';
  await wd.waitFind(plot, 30000).catch(async (e) => {
    console.log(await wd.exec("return document.body.innerText.slice(0, 500)"));
    throw e;
  });
  // Wait for data to be drawn, then compare two looks a second apart.
  const first = await waitFor("a drawn plot", async () => {
    const p = await wd.exec(CANVAS_PIXELS, [plot]);
    return p && p.drawn > 0.01 * p.total && p;
  }, 30000, 250);
  const rect = await wd.req("GET", wd.s(`/element/${await wd.find(plot)}/rect`));
  const shotA = decodePng(await wd.screenshot());
  await sleep(1500);
  const second = await wd.exec(CANVAS_PIXELS, [plot]);
  const shotB = decodePng(await wd.screenshot());
  assert.notEqual(first.hash, second.hash, "the plot's pixels changed");
  assert.ok(changedShare(first, second) > 0.001, `changed ${changedShare(first, second)}`);
  // The same check on what the screen shows: the plot's area of two screenshots.
  const diff = regionChange(shotA, shotB, rect);
  assert.ok(diff.share > 0.002, `plot area changed in ${diff.changed} of ${diff.total} pixels`);
  await wd.screenshot("webview-dashboard-light-en.png");
  // The page told the app it drew data, and the app logged its start-up time, once: what the
  // start-up bench reads from a launch with no driver attached.
  const startup = /the first frame with device data was drawn (\d+) ms after the app started/g;
  const logged = await waitFor("the start-up time in the app's log", () => {
    const all = [...readFileSync(driverProc.log, "utf8").matchAll(startup)];
    return all.length ? all : null;
  }, 10000, 100);
  assert.equal(logged.length, 1, "logged once");
  assert.ok(Number(logged[0][1]) > 0, `drawn ${logged[0][1]} ms after the start`);
  // The assistant, with its keyring probe, opens only after that first picture.
  const opened = await waitFor("the assistant opening", () => {
    const at = readFileSync(driverProc.log, "utf8").indexOf("the assistant opened");
    return at >= 0 ? { at } : null;
  }, 10000, 100);
  assert.ok(opened.at > logged[0].index, "the assistant opened after the first frame was drawn, not before");
});

test("switches workspaces", async () => {
  const tab = await wd.waitFind('[data-testid="workspace-tab"][data-workspace-id="ws-2"]');
  await wd.click(tab);
  await waitFor("the Navigation tab selected", async () => (await wd.attr(tab, "aria-selected")) === "true");
  await wd.waitFind('[data-testid="widget"][data-widget-kind="gps"]');
  const other = await wd.find('[data-testid="workspace-tab"][data-workspace-id="ws-1"]');
  assert.equal(await wd.attr(other, "aria-selected"), "false");
  await wd.screenshot("webview-navigation-light-en.png");
});

test("a painter runs in the webview's worker and draws", async () => {
  const tab = await wd.waitFind('[data-testid="workspace-tab"][data-workspace-id="ws-painter"]');
  await wd.click(tab);
  const painter = await wd.waitFind('[data-testid="painter"]');
  await waitFor("the painter drawing", async () => Number(await wd.attr(painter, "data-frames")) >= 5, 20000, 250).catch(async (e) => {
    console.log("painter:", await wd.attr(painter, "data-state"), await wd.exec("return document.querySelector('[data-testid=painter]')?.innerText ?? ''"));
    throw e;
  });
  assert.equal(await wd.attr(painter, "data-state"), "running");
  await wd.screenshot("webview-painter.png");
  await wd.click(await wd.find('[data-testid="workspace-tab"][data-workspace-id="ws-1"]'));
});

test("the console sends a line that arrives at the pty peer", async () => {
  const peer = listen(pty.b);
  try {
    await wd.click(await wd.waitFind('[data-testid="open-console"]'));
    await wd.waitFind('[data-testid="console"]');
    const source = await wd.findAll('[data-testid="console-source"]');
    if (source.length) {
      await wd.exec(`const s = document.querySelector('[data-testid="console-source"]'); s.value = 'uart'; s.dispatchEvent(new Event('change', {bubbles: true}));`);
    }
    await wd.exec(`const s = document.querySelector('[data-testid="console-line-ending"]'); s.value = 'lf'; s.dispatchEvent(new Event('change', {bubbles: true}));`);
    const input = await wd.find('[data-testid="console-input"]');
    await wd.type(input, "hello from the webview");
    await wd.click(await wd.find('[data-testid="console-send"]'));
    const got = await peer.until("hello from the webview\n");
    assert.ok(got.endsWith("hello from the webview\n"), JSON.stringify(got));
    await wd.screenshot("webview-console-light-en.png");
  } finally {
    peer.stop();
  }
});

/** Sets a form field the way typing would (Svelte listens for input/change events). */
function setField(css, value) {
  return wd.exec(
    `const el = document.querySelector(arguments[0]); el.value = arguments[1];
     el.dispatchEvent(new Event("input", {bubbles: true})); el.dispatchEvent(new Event("change", {bubbles: true}));`,
    [css, value],
  );
}

test("the chat panel streams a reply through the app's chat commands", async () => {
  provider = await scriptServer("anthropic_text.json");
  await wd.click(await wd.waitFind('[data-testid="chat-toggle"]'));
  await wd.click(await wd.waitFind('[data-testid="chat-settings"]'));
  await wd.waitFind('[data-testid="chat-base-url"]');
  await setField('[data-testid="chat-provider"]', "anthropic");
  await setField('[data-testid="chat-base-url"]', provider.url);
  await setField('[data-testid="chat-model"]', "claude-webview");
  await setField('[data-testid="chat-api-key"]', "sk-ant-webview");
  await wd.click(await wd.find('[data-testid="chat-settings-save"]'));
  // The app reports where the key went (no Secret Service here: the encrypted file).
  await waitFor("the stored key", async () =>
    /encrypted|keyring/i.test(await wd.text(await wd.find('[data-testid="chat-key-status"]'))), 10000);
  await wd.click(await wd.find('[data-testid="chat-new"]'));
  await wd.type(await wd.waitFind('[data-testid="chat-input"]'), "How is the supply?");
  await wd.click(await wd.find('[data-testid="chat-send"]'));
  await waitFor("the streamed reply", async () => {
    const texts = await wd.exec(
      `return [...document.querySelectorAll('[data-testid="chat-assistant"]')].map((e) => e.textContent)`);
    return texts.some((t) => t.includes("3.3 V – stable ✓"));
  }, 20000, 200);
  const requests = await provider.requests();
  assert.equal(requests.length, 1);
  assert.equal(requests[0].headers["x-api-key"], "sk-ant-webview");
  assert.equal(requests[0].body.model, "claude-webview");
  // The person's words open the newest message; the per-request blocks (the live state)
  // follow them, after the history's cache breakpoint.
  const newest = requests[0].body.messages.at(-1).content;
  assert.equal(newest[0].text, "How is the supply?");
  assert.deepEqual(newest[0].cache_control, { type: "ephemeral" });
  assert.match(newest.at(-1).text, /^Live state/);
  await wd.screenshot("webview-assistant-light-en.png");
});

test("an edit the model asks for is approved in the desktop app and lands in the project", async () => {
  const edits = await scriptServer("service/anthropic_one_edit.json");
  try {
    await wd.click(await wd.waitFind('[data-testid="chat-settings"]'));
    await wd.waitFind('[data-testid="chat-base-url"]');
    await setField('[data-testid="chat-base-url"]', edits.url);
    await setField('[data-testid="chat-api-key"]', "sk-ant-webview");
    await wd.click(await wd.find('[data-testid="chat-settings-save"]'));
    await waitFor("the new address saved", async () =>
      /key is stored/i.test(await wd.text(await wd.find('[data-testid="chat-key-status"]'))), 10000);
    await wd.click(await wd.find('[data-testid="chat-new"]'));
    await wd.type(await wd.waitFind('[data-testid="chat-input"]'), "Add an Engine group");
    await wd.click(await wd.find('[data-testid="chat-send"]'));
    const card = '[data-testid="tool-card"][data-call-id="toolu_d1"]';
    await wd.click(await wd.waitFind(`${card} [data-testid="tool-approve"]`, 20000));
    await waitFor("the approved call to succeed", async () =>
      (await wd.attr(await wd.find(card), "data-status")) === "ok", 20000, 200);
    await waitFor("the model's answer", async () => {
      const texts = await wd.exec(
        `return [...document.querySelectorAll('[data-testid="chat-assistant"]')].map((e) => e.textContent)`);
      return texts.some((t) => t.includes("Understood."));
    }, 20000, 200);
    // The group is in the app's project: the Project screen's tree shows it.
    await wd.click(await wd.find('[data-nav="project"]'));
    await waitFor("the Engine group in the project tree", async () => {
      const groups = await wd.exec(
        `return [...document.querySelectorAll('[data-testid="tree-group"]')].map((e) => e.textContent)`);
      return groups.some((t) => t.includes("Engine"));
    }, 10000, 200);
    await wd.screenshot("webview-assistant-approved-light-en.png");
  } finally {
    edits.stop();
  }
});

test("a remembered fact survives a restart of the desktop app", async () => {
  // The chat panel is open (the tests above opened it); the manager keeps a fact.
  await wd.click(await wd.waitFind('[data-testid="chat-memory-open"]'));
  await wd.waitFind('[data-testid="memory-add-text"]');
  await setField('[data-testid="memory-add-text"]', "the bench UART runs at 115200 baud 8N1");
  await wd.click(await wd.find('[data-testid="memory-add"]'));
  await waitFor("the kept fact", async () => {
    const facts = await wd.exec(`return [...document.querySelectorAll('[data-testid="memory-fact"]')].map((e) => e.textContent)`);
    return facts.some((t) => t.includes("115200 baud 8N1"));
  }, 10000, 200);
  // Quit and start the app again, on the same data folder.
  await wd.close();
  await wd.open({ "tauri:options": { application: desktopBin, args: [join(dir, "bench.json")] } });
  await wd.click(await wd.waitFind('[data-testid="chat-toggle"]'));
  await wd.click(await wd.waitFind('[data-testid="chat-memory-open"]'));
  await waitFor("the fact after the restart", async () => {
    const facts = await wd.exec(`return [...document.querySelectorAll('[data-testid="memory-fact"]')].map((e) => e.textContent)`);
    return facts.some((t) => t.includes("115200 baud 8N1"));
  }, 15000, 200);
  await wd.screenshot("webview-memory-after-restart-light-en.png");
});

test("--help prints usage, and without a display the app says what to do instead of panicking", async () => {
  const { spawnSync } = await import("node:child_process");
  const help = spawnSync(desktopBin, ["--help"], { encoding: "utf8", timeout: 20000 });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /Usage: sextant-desktop/);
  const env = { ...process.env };
  delete env.DISPLAY;
  delete env.WAYLAND_DISPLAY;
  const headless = spawnSync(desktopBin, [], { encoding: "utf8", env, timeout: 20000 });
  assert.equal(headless.status, 1, `${headless.stdout}\n${headless.stderr}`);
  assert.match(headless.stderr, /no display/);
  assert.match(headless.stderr, /sextant serve --http-port 7777/);
  assert.doesNotMatch(headless.stderr, /panicked|backtrace/i);
});
