// Output controls against a real serial device: a pty pair, the app on one end and the test
// reading the other. A button sends its script's bytes, a toggle its on and off strings, a
// slider and a knob their values (the last value of a drag always arrives), a text field
// its text through a checksum script; a script that throws shows its error to the person
// and sends nothing. The same project imported from a Serial Studio output group draws the
// same controls. (That the assistant and the other doors must ask before a control sends is
// proved in runtime/tests/actions.rs and the injection corpus.) Screenshots in light and dark. Runs against `sextant serve` in Chromium;
// the UI it serves is ui/dist, or $SEXTANT_UI_DIST.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, connectedDashboard, listen, ptyPair, servedProject, tempDir, waitFor } from "./harness.mjs";

let stage, browser, dir, url, pty, peer;

const controls = [
  { id: "arm", title: "Arm", kind: "button", transmit: 'function transmit(v) { return "ARM " + v + "\\n"; }' },
  { id: "relay", title: "Relay", kind: "toggle", onLabel: "Closed", offLabel: "Open", transmit: 'function transmit(v) { return v ? "RELAY ON\\n" : "RELAY OFF\\n"; }' },
  { id: "pwm", title: "PWM", kind: "slider", min: 0, max: 100, step: 5, initial: 20, transmit: 'function transmit(v) { return "PWM " + v + "\\n"; }' },
  { id: "gain", title: "Gain", kind: "knob", min: -12, max: 12, step: 0.5, initial: 0, transmit: 'function transmit(v) { return "GAIN " + v.toFixed(1) + "\\n"; }' },
  // NMEA-style: the text, an XOR checksum in hex.
  {
    id: "cmd", title: "Command", kind: "textField",
    transmit: 'function transmit(v) { var c = 0; for (var i = 0; i < v.length; i++) c ^= v.charCodeAt(i); return "$" + v + "*" + ("0" + c.toString(16).toUpperCase()).slice(-2) + "\\r\\n"; }',
  },
  { id: "broken", title: "Broken", kind: "button", transmit: 'function transmit(v) { throw new Error("relay board missing"); }' },
];

before(async () => {
  dir = tempDir("sextant-controls-");
  pty = await ptyPair(dir);
  peer = listen(pty.b);
  stage = await servedProject(dir, "controls", {
    format: "sextant-project", schemaVersion: 1, title: "Bench controls",
    sources: [{ id: "bench", title: "Bench", parser: { kind: "delimited" }, connection: { type: "serial", port: pty.a, baud: 115200 } }],
    groups: [{ id: "out", title: "Bench controls", widget: "output", datasets: [], controls }],
    workspaces: [{ id: "ws", title: "Controls", tiles: [{ group: "out", x: 0, y: 0, w: 8, h: 4 }] }],
  });
  ({ url, browser } = stage);
});

after(async () => {
  await stage?.stop();
  peer?.stop();
  pty?.stop();
});

const control = (p, id) => p.locator(`[data-testid="control"][data-control-id="${id}"]`);

for (const theme of ["light", "dark"]) {
  test(`each control sends what its script makes of its value to the device (${theme})`, async () => {
    const { context, p } = await connectedDashboard(browser, url, { theme, viewport: { width: 1280, height: 800 } });
    await p.locator('[data-testid="controls"]').waitFor({ timeout: 10000 });
    const before = (text) => peer.count(text);
    let at;

    // A button: its script's bytes, once per click.
    const arms = before("ARM 1\n");
    at = peer.mark();
    await control(p, "arm").locator("button").click();
    await peer.until("ARM 1\n", 15000, at);
    await waitFor("one ARM per click", () => peer.count("ARM 1\n") === arms + 1, 5000);

    // A toggle: on, then off, with its own labels.
    const relay = control(p, "relay").getByRole("switch");
    assert.equal(await relay.getAttribute("aria-checked"), "false");
    assert.match(await relay.innerText(), /Open/);
    const ons = before("RELAY ON\n"), offs = before("RELAY OFF\n");
    await relay.click();
    await waitFor("RELAY ON", () => peer.count("RELAY ON\n") === ons + 1, 5000);
    assert.match(await relay.innerText(), /Closed/);
    await relay.click();
    await waitFor("RELAY OFF", () => peer.count("RELAY OFF\n") === offs + 1, 5000);

    // A slider dragged across: paced sends, and the value it stopped at always arrives.
    at = peer.mark();
    const slider = control(p, "pwm").locator('input[type="range"]');
    const box = await slider.boundingBox();
    await p.mouse.move(box.x + 2, box.y + box.height / 2);
    await p.mouse.down();
    for (let k = 1; k <= 12; k++) await p.mouse.move(box.x + (box.width * k) / 16, box.y + box.height / 2);
    await p.mouse.move(box.x + box.width - 1, box.y + box.height / 2);
    await p.mouse.up();
    await peer.until("PWM 100\n", 15000, at);
    assert.equal(await control(p, "pwm").locator("output").innerText(), "100");
    // Keys move it a step at a time; each value is sent.
    await slider.focus();
    at = peer.mark();
    await p.keyboard.press("ArrowLeft");
    await peer.until("PWM 95\n", 15000, at);

    // A knob: arrow keys step it, End takes it to its top.
    const knob = control(p, "gain").getByRole("slider");
    await knob.focus();
    at = peer.mark();
    await p.keyboard.press("ArrowUp");
    await peer.until("GAIN 0.5\n", 15000, at);
    at = peer.mark();
    await p.keyboard.press("End");
    await peer.until("GAIN 12.0\n", 15000, at);
    assert.equal(await knob.getAttribute("aria-valuenow"), "12");
    // A drag down lowers it.
    const kb = await knob.boundingBox();
    at = peer.mark();
    await p.mouse.move(kb.x + kb.width / 2, kb.y + kb.height / 2);
    await p.mouse.down();
    await p.mouse.move(kb.x + kb.width / 2, kb.y + kb.height / 2 + 100, { steps: 5 });
    await p.mouse.up();
    await peer.until("GAIN 0.0\n", 15000, at);

    // A text field: Enter sends the text through the script (with its checksum).
    const field = control(p, "cmd").locator('input[type="text"]');
    await field.fill("PMTK220,1000");
    at = peer.mark();
    await field.press("Enter");
    await peer.until("$PMTK220,1000*1F\r\n", 15000, at);
    // The drags' paced sends have all gone: what comes next is the broken script's.
    await p.waitForTimeout(300);

    // A script that throws: the person reads why, nothing reaches the device.
    const sizeBefore = peer.count("\n");
    await control(p, "broken").locator("button").click();
    const toast = p.locator('[data-testid="toast"]', { hasText: "Broken" });
    await toast.waitFor({ timeout: 5000 });
    assert.match(await toast.innerText(), /relay board missing/);
    await p.waitForTimeout(300);
    assert.equal(peer.count("\n"), sizeBefore, "a failed script sent nothing");

    await p.locator('[data-testid="controls"]').screenshot({ path: join(artifacts, `widgets-controls-${theme}.png`) });
    await context.close();
  });
}
