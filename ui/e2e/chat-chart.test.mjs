// A chart in the chat, drawn from the data: a session is recorded from the simulator
// through `sextant serve`, a scripted model (real HTTP, Anthropic's SSE wire format) answers
// with a ```chart block naming the session, a range and a dataset – no numbers – and the
// panel draws it. Every point it draws is one of the session's own samples in that range
// (its CSV export), its extremes are the range's, and its link opens the replay at that
// range on the dashboard. In English and light, and in Chinese and dark.
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { artifacts, loadProject, pageCommand, scriptServer, servedProject, tempDir, waitFor } from "./harness.mjs";

let stage, dir;

before(async () => {
  dir = tempDir("sextant-chart-");
  stage = await servedProject(dir, "chart", loadProject({ plots: 2, rate: 200 }));
});

after(async () => {
  await stage?.stop();
});

const call = pageCommand;

/** A scripted turn: the model says `text` and stops. */
function textTurn(id, text) {
  const ev = (event, data) => ({ event, data: { type: event, ...data } });
  return {
    sse: [
      ev("message_start", { message: { id, type: "message", role: "assistant", content: [], usage: { input_tokens: 50, output_tokens: 1, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 } } }),
      ev("content_block_start", { index: 0, content_block: { type: "text", text: "" } }),
      // In two pieces: the chart's fence arrives while the reply streams.
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: text.slice(0, 40) } }),
      ev("content_block_delta", { index: 0, delta: { type: "text_delta", text: text.slice(40) } }),
      ev("content_block_stop", { index: 0 }),
      ev("message_delta", { delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 40 } }),
      ev("message_stop", {}),
    ],
  };
}

/** The CSV's rows as [t, value of `column`] (text as written: the chart's times are the
 *  session's, which the CSV prints to a microsecond). */
function csvColumn(csv, column) {
  const [header, ...rows] = csv.trim().split("\n");
  const at = header.split(",").indexOf(column);
  assert.ok(at > 0, `${column} in ${header}`);
  return rows.map((r) => r.split(",")).map((c) => [Number(c[0]), Number(c[at])]);
}

for (const [theme, language] of [["light", "en"], ["dark", "zh"]]) {
  test(`a scripted model answers with a chart of a recorded range: every point is the session's, the link opens the replay there (${theme}, ${language})`, async () => {
    const context = await stage.browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.addInitScript((s) => localStorage.setItem("sextant.settings", JSON.stringify(s)), { theme, language });
    const page = await context.newPage();
    page.on("pageerror", (e) => console.error("page error:", e.message));
    await page.goto(stage.url);
    await page.waitForSelector(".shell");

    // Two and a half seconds of the simulator, recorded.
    await call(page, "sessions.setDatabase", { path: join(dir, `sessions-${theme}.sqlite`) });
    await call(page, "io.connect");
    // 2.5 s of frames, counted rather than slept: on a loaded machine the pipeline can lag
    // the clock, and a session stopped after 2.5 s of waiting held only 1.1 s of frames.
    const parsed = async () => (await call(page, "io.status")).sources?.[0]?.frames ?? 0;
    const { id } = await call(page, "sessions.startRecording", { title: `Bench run ${theme}` });
    const from = await parsed();
    await waitFor("2.5 s of the simulator's frames", async () => (await parsed()) >= from + 500, 30000, 100);
    await call(page, "sessions.stopRecording");
    await call(page, "io.disconnect");
    const { csv } = await call(page, "sessions.csv", { id });
    const fromS = 0.5, toS = 1.5;
    const rows = csvColumn(csv, "Channels/ch1").filter(([t]) => t >= fromS - 1e-6 && t <= toS + 1e-6);
    assert.ok(rows.length > 100, `${rows.length} rows in the range`);

    const chart = { window: { session: id, fromS, toS }, datasets: ["Channels/ch1"] };
    const script = join(dir, `chart-${theme}.json`);
    writeFileSync(script, JSON.stringify({
      description: "Browser: the model answers with a chart block naming a session's range.",
      turns: [textTurn("msg_c1", `Here is ch1 from ${fromS} s to ${toS} s:\n\n\`\`\`chart\n${JSON.stringify(chart)}\n\`\`\`\n\nIt is a clean sine.`)],
    }));
    const provider = await scriptServer(script);
    try {
      await page.click('[data-testid="chat-toggle"]');
      await page.click('[data-testid="chat-settings"]');
      await page.selectOption('[data-testid="chat-provider"]', "anthropic");
      await page.fill('[data-testid="chat-base-url"]', provider.url);
      await page.fill('[data-testid="chat-model"]', `claude-chart-${theme}`);
      await page.fill('[data-testid="chat-api-key"]', "sk-ant-e2e-chart");
      await page.click('[data-testid="chat-settings-save"]');
      await page.locator('[data-testid="chat-settings-message"]').waitFor();
      await page.click('[data-testid="chat-new"]');
      await page.fill('[data-testid="chat-input"]', language === "zh" ? "在聊天里画图：ch1" : "Show me a chart of ch1 from the recording");
      await page.click('[data-testid="chat-send"]');

      const plot = page.locator('[data-testid="chat-chart-plot"][data-points]');
      await plot.waitFor({ timeout: 20000 });
      const [line] = JSON.parse(await plot.getAttribute("data-points"));
      assert.equal(line.dataset, "Channels/ch1");
      assert.ok(line.t.length >= 20, `${line.t.length} points`);
      // Every point drawn is a sample of the session in the range, at its time (a chunk of
      // the device can hold several frames, which share its time).
      line.t.forEach((t, i) => {
        assert.ok(t >= fromS && t <= toS, `point at ${t} s is outside the range`);
        const at = rows.filter(([rt]) => Math.abs(rt - t) <= 1e-6);
        assert.ok(at.length, `no sample of the session at ${t} s`);
        assert.ok(at.some(([, v]) => v === line.v[i]), `the point at ${t} s is ${line.v[i]}, the session's samples then: ${JSON.stringify(at)}`);
      });
      // Its extremes are the range's (each bucket keeps its lowest and highest sample).
      const values = rows.map((r) => r[1]);
      assert.equal(Math.min(...line.v), Math.min(...values));
      assert.equal(Math.max(...line.v), Math.max(...values));
      // The reply reads as text around the chart; the chart is no code block.
      const reply = page.locator('[data-testid="chat-assistant"]').last();
      assert.match(await reply.innerText(), /clean sine/);
      assert.equal(await reply.locator("pre").count(), 0, "the chart block was shown as code");
      const caption = await page.locator('[data-testid="chat-chart"] figcaption').innerText();
      assert.match(caption, new RegExp(`Bench run ${theme}`));
      assert.match(caption, language === "zh" ? /0\.50 秒至 1\.50 秒/ : /0\.50 s to 1\.50 s/);
      await page.screenshot({ path: join(artifacts, `browser-chat-chart-${theme}-${language}.png`) });

      // The link: the session replays from the chart's start, the dashboard shows its span.
      // The page starts on the dashboard, so its being active says nothing about the link's
      // steps (replay, seek, view), which run one after another: wait for their outcome.
      await page.click('[data-testid="chat-chart-open"]');
      await page.locator('[data-nav="dashboard"].active').waitFor({ timeout: 10000 });
      const seen = {};
      try {
        await waitFor("the replay at the chart's start and the dashboard showing its span", async () => {
          seen.replays = (await call(page, "replay.getState")).replays;
          seen.view = await call(page, "dashboard.getView");
          return seen.replays.length && seen.replays[0].positionS >= fromS - 0.05 && seen.view.timeRangeS === toS - fromS;
        }, 10000);
      } finally {
        assert.ok(seen.replays?.length, "no replay started");
        assert.ok(seen.replays[0].positionS >= fromS - 0.05, `the replay is at ${JSON.stringify(seen.replays)}`);
        assert.equal(seen.view.timeRangeS, toS - fromS);
      }
      await call(page, "io.disconnect");
    } finally {
      provider.stop();
      await context.close();
    }
  });
}
