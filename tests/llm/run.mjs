// The assistant end to end with a real local model: llama-server serving SmolLM2-135M,
// `sextant serve` talking to it, and a fixed, bounded script of user turns sent through the
// chat panel's own door (the WebSocket chat ops). Prints a report per turn and ends with
// one line: "N passed, N failed". Two questions about the data (the average temperature in
// the last 10 s, when the voltage went below 3 V) are reported – right call or not, figure
// stated or not – without failing the run. `./dev test-llm` builds what it needs and runs this.
//
// Environment: SEXTANT_LLAMA_SERVER, SEXTANT_LLM_MODEL (paths), SEXTANT_BIN (the sextant
// binary), SEXTANT_UI_DIR (the built UI, optional).
//
// `--record CHAT`: instead of the script, sends the person's messages of the long chat
// `fixtures/assistant/long-chats/CHAT.json` to the real model and writes what it did –
// each reply's text and tool calls, in the long chats' shape – to
// `fixtures/assistant/long-chats/CHAT-smollm2.json`: a chat recorded from a real run, for
// the staying-on-topic benchmark.

import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, existsSync, openSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createServer } from "node:net";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const need = (name) => {
  const v = process.env[name];
  if (!v || !existsSync(v)) {
    console.error(`error: ${name} must name an existing file (run \`./dev test-llm\`, which builds it)`);
    process.exit(2);
  }
  return v;
};
const llamaServer = need("SEXTANT_LLAMA_SERVER");
const modelPath = need("SEXTANT_LLM_MODEL");
const sextant = need("SEXTANT_BIN");
const MODEL = "SmolLM2-135M-Instruct";
/** No turn may take longer; past it the turn counts as hung and is stopped. */
const TURN_LIMIT_MS = 360_000;

/** The script: what a new user would ask, in both languages; `ask` marks the edit asked for. */
const SCRIPT = [
  { text: "Hello! What can you do for me?" },
  { text: "What is in the project?" },
  { text: "Add a dataset called Battery to the Power group.", ask: "project_dataset_add" },
  { text: "Rename the project to Bench A." },
  { text: "Which datasets are in the Power group?" },
  { text: "Add a gauge for the battery voltage to the dashboard." },
  { text: "请把项目名称改为 测试台。" },
  { text: "Is the device connected?" },
  { text: "What did you change so far?" },
  { text: "Thanks, that is all." },
];

const dir = mkdtempSync(join(tmpdir(), "sextant-llm-"));
const children = [];
const checks = [];
const check = (ok, what) => {
  checks.push({ ok, what });
  console.log(`${ok ? "ok" : "FAILED"} – ${what}`);
};

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function start(name, cmd, args) {
  const log = openSync(join(dir, `${name}.log`), "a");
  const child = spawn(cmd, args, { stdio: ["ignore", log, log], cwd: dir });
  children.push(child);
  return child;
}

async function waitFor(what, probe, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      if (await probe()) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} did not come up within ${ms / 1000} s (logs in ${dir})`);
}

function stopAll() {
  for (const c of children) {
    try {
      c.kill("SIGTERM");
    } catch {}
  }
}
process.on("exit", stopAll);

/** The chat door over one WebSocket: `op(name, fields)` and a queue of chat events. */
async function door(url, origin, secret) {
  const ws = new WebSocket(url, { headers: { Origin: origin } });
  await new Promise((resolve, reject) => {
    ws.onopen = resolve;
    ws.onerror = (e) => reject(new Error(`the WebSocket did not open: ${e.message ?? e}`));
  });
  ws.send(JSON.stringify({ type: "auth", token: secret }));
  let next = 1;
  const waiting = new Map();
  const events = [];
  let wake = null;
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "response" && waiting.has(msg.id)) {
      const { resolve, reject } = waiting.get(msg.id);
      waiting.delete(msg.id);
      msg.success ? resolve(msg.result) : reject(new Error(msg.error?.message ?? "failed"));
    } else if (msg.type === "chatEvent") {
      events.push(msg.event);
      wake?.();
    }
  };
  const send = (frame) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ ...frame, id }));
    });
  return {
    op: (op, fields = {}) => send({ type: "chat", op, ...fields }),
    command: (command, params = {}) => send({ type: "command", command, params }),
    /** The next chat event, or null after `ms`. */
    async event(ms) {
      const until = Date.now() + ms;
      while (!events.length) {
        const left = until - Date.now();
        if (left <= 0) return null;
        await new Promise((r) => {
          wake = r;
          setTimeout(r, Math.min(left, 1000));
        });
        wake = null;
      }
      return events.shift();
    },
    close: () => ws.close(),
  };
}

/** Runs one turn to its end (or the limit); what it showed and how long things took. */
async function runTurn(d, chat, text) {
  const t0 = performance.now();
  await d.op("send", { chat, text });
  const turn = { text: "", firstToken: null, end: null, detail: null, waiting: 0, usage: [], calls: new Map() };
  while (true) {
    const e = await d.event(TURN_LIMIT_MS - (performance.now() - t0));
    if (!e) {
      await d.op("cancel", { chat });
      turn.end = "hung";
      break;
    }
    if (e.chat !== chat) continue;
    if ((e.type === "textDelta" || e.type === "toolCallStarted") && turn.firstToken === null) {
      turn.firstToken = performance.now() - t0;
    }
    if (e.type === "textDelta") turn.text += e.text;
    if (e.type === "waiting") turn.waiting++;
    if (e.type === "usage") turn.usage.push(e);
    if (e.type === "toolCallPending") turn.calls.set(e.id, { name: e.name, args: e.args });
    if (e.type === "toolCallDone") Object.assign(turn.calls.get(e.id) ?? {}, { status: e.status, result: e.content });
    if (e.type === "turnEnded") {
      turn.end = e.end;
      turn.detail = e.detail;
      break;
    }
  }
  turn.ms = performance.now() - t0;
  return turn;
}

/** The figures of a call's result (the JSON inside its envelope), or null. */
function resultJson(call) {
  const text = call?.result ?? "";
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  try {
    return start >= 0 ? JSON.parse(text.slice(start, end + 1)) : null;
  } catch {
    return null;
  }
}

/** Whether `text` states `x` to the precision a person would (2 significant decimals or
 *  better, or the integer). */
function states(text, x) {
  if (!Number.isFinite(x)) return false;
  const numbers = (text.match(/-?\d+(?:\.\d+)?/g) ?? []).map(Number);
  return numbers.some((n) => Math.abs(n - x) <= Math.max(0.01, Math.abs(x) * 0.005));
}

/** Questions about the data, with the demo device connected: whether the model called the
 *  right command on the right dataset, and whether its reply states the figure the command
 *  returned. Reported, not checked: a 135M model is not expected to answer them. */
async function dataQuestions(d) {
  await d.command("io.connect");
  // Ten seconds of data for "the last 10 s".
  await new Promise((r) => setTimeout(r, 11_000));
  const chat = (await d.op("create", { title: "data questions" })).id;
  const asks = [
    {
      text: "What was the average temperature in the last 10 s?",
      right: (c) => c.name === "data_summary" && Math.abs((c.args?.window?.lastS ?? 0) - 10) < 1 &&
        (!c.args?.datasets || c.args.datasets.some((n) => /temperature/i.test(n))),
      figure: (r) => r?.datasets?.find((x) => /temperature/i.test(x.dataset))?.mean,
    },
    {
      text: "When did the voltage go below 3 V?",
      right: (c) => c.name === "data_find" && /voltage/i.test(c.args?.dataset ?? "") &&
        c.args?.condition?.kind === "below" && c.args?.condition?.level === 3,
      figure: (r) => r?.ranges?.[0]?.startS ?? r?.count,
    },
  ];
  for (const ask of asks) {
    const turn = await runTurn(d, chat, ask.text);
    const calls = [...turn.calls.values()];
    const call = calls.find(ask.right);
    const figure = ask.figure(resultJson(call));
    const said = call && figure !== undefined && states(turn.text, figure);
    console.log(
      `report – "${ask.text}": ${call ? "the right call" : `not the right call (${calls.map((c) => `${c.name} ${JSON.stringify(c.args)}`).join("; ") || "no call"})`}` +
        `; ${said ? `the reply states ${figure}` : `the reply does not state the figure${figure !== undefined ? ` ${figure}` : ""}`} (${turn.end}): ${JSON.stringify(turn.text.slice(0, 120))}`,
    );
  }
  await d.command("io.disconnect");
}

/** A call's arguments were wrong in form: not JSON, or refused by the command's schema. */
const malformed = (c) =>
  c.status !== "ok" && /invalid arguments|invalid params|not valid JSON|unknown field|missing field|expected/i.test(c.result ?? "");

async function main() {
  const llamaPort = await freePort();
  const httpPort = await freePort();
  start("llama-server", llamaServer, [
    "-m", modelPath, "--host", "127.0.0.1", "--port", String(llamaPort),
    "-t", process.argv.includes("--record") ? "2" : "1", "--cache-ram", "0", "-c", "8192", "--alias", MODEL,
  ]);
  const llama = `http://127.0.0.1:${llamaPort}`;
  await waitFor("llama-server", async () => (await fetch(`${llama}/health`)).ok, 120_000);
  const props = await (await fetch(`${llama}/props`)).json();
  const supportsTools = props.chat_template_caps?.supports_tools;
  console.log(`llama-server up: ${MODEL}, n_ctx ${props.default_generation_settings?.n_ctx}, template supports tools: ${supportsTools}`);

  // The demo project, with a Power group for the edit the script asks for.
  const project = join(dir, "bench.json");
  const demo = spawnSync(sextant, ["demo", "--print-project"], { encoding: "utf8" });
  if (demo.status !== 0) throw new Error(`sextant demo --print-project failed: ${demo.stderr}`);
  writeFileSync(project, demo.stdout);
  const dataDir = join(dir, "data");
  const ui = process.env.SEXTANT_UI_DIR || join(repo, "ui/dist");
  start("sextant", sextant, ["serve", "--http-port", String(httpPort), "--ui", ui, "--project", project, "--data-dir", dataDir]);
  const origin = `http://127.0.0.1:${httpPort}`;
  await waitFor("sextant serve", async () => (await fetch(`${origin}/`)).ok, 30_000);
  // The UI's address carries this launch's secret, which the door proves before anything.
  const secret = readFileSync(join(dir, "sextant.log"), "utf8").match(/Sextant UI on \S+\?token=(\w+)/)?.[1];
  if (!secret) throw new Error(`sextant serve printed no UI address (logs in ${dir})`);
  const d = await door(`ws://127.0.0.1:${httpPort}/ws`, origin, secret);
  const groups = (await d.command("project.get")).groups ?? [];
  if (!groups.some((g) => g.title === "Power")) await d.command("project.group.add", { title: "Power" });

  if (process.argv.includes("--cache")) return cacheReport(d, llama);
  const recordAt = process.argv.indexOf("--record");
  if (recordAt > 0) return record(d, llama, process.argv[recordAt + 1]);
  await d.op("setSettings", {
    provider: "openai-compatible", baseUrl: `${llama}/v1`, model: MODEL, autoApproveEdits: true, constrainedCalls: "auto",
  });
  const chat = (await d.op("create", { title: "local model" })).id;
  const turns = [];
  console.log("\nturn | end | first token | tok/s | prompt new/cached | calls | text");
  for (const [i, step] of SCRIPT.entries()) {
    const turn = await runTurn(d, chat, step.text);
    turns.push({ step, turn });
    const out = turn.usage.reduce((n, u) => n + u.outputTokens, 0);
    const last = turn.usage.at(-1);
    const calls = [...turn.calls.values()].map((c) => `${c.name}:${c.status}`).join(",") || "-";
    const tps = turn.firstToken !== null && out ? (out / ((turn.ms - turn.firstToken) / 1000)).toFixed(1) : "-";
    console.log(
      `${i + 1} | ${turn.end}${turn.detail ? `(${turn.detail})` : ""} | ${turn.firstToken === null ? "-" : (turn.firstToken / 1000).toFixed(1) + " s"} | ${tps} | ` +
        `${last ? `${last.inputTokens}/${last.cacheReadTokens}` : "-"} | ${calls} | ${JSON.stringify(turn.text.slice(0, 70))}`,
    );
  }
  await dataQuestions(d);
  const all = turns.flatMap((t) => [...t.turn.calls.values()]);

  check(turns.every((t) => t.turn.end !== "hung"), `no hung turns (${turns.filter((t) => t.turn.end === "hung").length} of ${turns.length})`);
  check(
    turns.every((t) => ["finished", "toolCallLimit", "cancelled"].includes(t.turn.end)),
    `every turn ended with a state the panel shows: ${turns.map((t) => t.turn.end + (t.turn.detail ? `(${t.turn.detail})` : "")).join(", ")}`,
  );
  check(all.every((c) => !malformed(c)), `0 malformed tool calls (${all.filter(malformed).length} of ${all.length} calls)`);
  const asked = turns.find((t) => t.step.ask);
  const askedCalls = [...asked.turn.calls.values()];
  const valid = askedCalls.filter((c) => !malformed(c));
  const which = valid.find((c) => c.name === asked.step.ask) ? `${asked.step.ask} itself` : valid.map((c) => c.name).join(", ") || "none";
  check(valid.length > 0, `"${asked.step.text}" produced a schema-valid call (${which}): ${JSON.stringify(askedCalls.map((c) => ({ name: c.name, args: c.args, status: c.status })))}`);
  // The same server with constrained calls off: its template drops tools, and the chat says so.
  await d.op("setSettings", { constrainedCalls: "off" });
  const plain = (await d.op("create", { title: "native tools" })).id;
  const t = await runTurn(d, plain, "Rename the project to Bench B.");
  const notices = (await d.op("history", { chat: plain })).items.filter((i) => i.kind === "tools_unavailable");
  if (supportsTools === false) {
    check(notices.length === 1, `constrained calls off on a template without tools: the notice (${notices.length}), turn ${t.end}`);
  } else {
    check(notices.length === 0, `the template supports tools: no notice (${notices.length})`);
  }

  // The context probe on a model that never complies: chat turns without tools (this
  // template drops them), each a final reply the probe judges. No banner, ever; muted
  // after its third miss.
  const asks = ["What is a dataset?", "And a group?", "What is a gauge?", "What is MQTT?", "What is a baud rate?",
    "What is CAN?", "What is Modbus?", "What is a CSV file?", "What is a frame?", "Thanks."];
  let replies = turns.filter((x) => x.turn.end === "finished").length + (t.end === "finished" ? 1 : 0);
  for (const text of asks) {
    const x = await runTurn(d, plain, text);
    if (x.end === "finished") replies++;
    check(x.end !== "hung", `chat turn "${text}" ended (${x.end}${x.detail ? `(${x.detail})` : ""})`);
  }
  const degraded = [(await d.op("history", { chat })).degraded, (await d.op("history", { chat: plain })).degraded];
  check(replies >= 10 && degraded.every((x) => x === null), `no context-probe banner over ${replies} replies of a never-compliant model (degraded: ${JSON.stringify(degraded)})`);
  const compliance = JSON.parse(readFileSync(join(dataDir, "probe-compliance.json"), "utf8"));
  const entry = Object.entries(compliance.models ?? compliance).find(([k]) => k.includes(MODEL));
  // The file says muted as `compliant: false` (absent while unclassified).
  check(entry && entry[1].compliant === false && entry[1].failures >= 3, `the model is muted in its compliance file after 3 misses: ${JSON.stringify(entry)}`);
  const verdicts = (await d.op("history", { chat: plain })).items.filter((i) => i.type === "notice" && i.kind === "probe_verdict").map((i) => i.payload.verdict);
  console.log(`probe verdicts: ${verdicts.join(", ")}`);

  // Cache reuse over the chat: new vs cached prompt tokens of each turn's last request.
  const cache = turns.map((x) => x.turn.usage.at(-1)).filter(Boolean);
  const reused = cache.reduce((n, u) => n + u.cacheReadTokens, 0);
  const fresh = cache.reduce((n, u) => n + u.inputTokens, 0);
  console.log(`prompt tokens over ${cache.length} turns: ${fresh} new, ${reused} reused from the server's cache`);
  d.close();
  const failed = checks.filter((c) => !c.ok).length;
  console.log(`\n${checks.length - failed} passed, ${failed} failed`);
  stopAll();
  process.exit(failed ? 1 : 0);
}

/** `--record CHAT`: the person's messages of a long chat, answered by the real model with
 *  every edit approved; its replies (one per response: the text, then the calls it made)
 *  written as a long chat. A turn that ends on calls (the call limit) gets an empty closing
 *  reply, as the panel shows it: the replay needs every turn to end on a reply. */
async function record(d, llama, name) {
  if (!name) throw new Error("--record needs the name of a long chat, e.g. --record modbus");
  const source = JSON.parse(readFileSync(join(repo, "fixtures/assistant/long-chats", `${name}.json`), "utf8"));
  // `--turns N`: the first N of the person's messages (a 135M model on a laptop CPU takes a
  // minute or two a turn, more as the chat grows).
  const turnsAt = process.argv.indexOf("--turns");
  const limit = turnsAt > 0 ? Number(process.argv[turnsAt + 1]) : source.turns.length;
  const path = join(repo, "fixtures/assistant/long-chats", `${name}-smollm2.json`);
  const write = (turns) => {
    const out = {
      schema: 1,
      title: `${source.title} (SmolLM2-135M)`,
      description: `The first ${turns.length} of the person's messages of \`${name}\`, answered by ${MODEL} through llama-server and the real chat door (edits approved), recorded with \`./dev test-llm --record ${name}\` on ${new Date().toISOString().slice(0, 10)}.`,
      turns,
    };
    // After every turn: a run stopped half-way keeps what it recorded.
    writeFileSync(path, JSON.stringify(out, null, 1) + "\n");
  };
  await d.op("setSettings", {
    provider: "openai-compatible", baseUrl: `${llama}/v1`, model: MODEL, autoApproveEdits: true, constrainedCalls: "auto",
  });
  const chat = (await d.op("create", { title: source.title })).id;
  const turns = [];
  for (const [i, { user }] of source.turns.slice(0, limit).entries()) {
    const t0 = performance.now();
    await d.op("send", { chat, text: user });
    const replies = [];
    let reply = { text: "", calls: [] };
    let end = null;
    while (end === null) {
      const e = await d.event(TURN_LIMIT_MS - (performance.now() - t0));
      if (!e) {
        await d.op("cancel", { chat });
        end = "hung";
        break;
      }
      if (e.chat !== chat) continue;
      if (e.type === "textDelta") reply.text += e.text;
      if (e.type === "toolCallPending") reply.calls.push({ name: e.name, args: e.args ?? {} });
      // One provider response ends with its usage: the next text or call is a new reply.
      if (e.type === "usage" && (reply.text || reply.calls.length)) {
        replies.push(reply);
        reply = { text: "", calls: [] };
      }
      if (e.type === "turnEnded") end = e.end;
    }
    if (reply.text || reply.calls.length) replies.push(reply);
    if (!replies.length || replies.at(-1).calls.length) replies.push({ text: "", calls: [] });
    turns.push({ user, replies });
    write(turns);
    const calls = replies.reduce((n, r) => n + r.calls.length, 0);
    console.log(`${i + 1}/${limit} | ${end} | ${((performance.now() - t0) / 1000).toFixed(0)} s | ${replies.length} replies, ${calls} calls`);
  }
  console.log(`recorded ${turns.length} turns to ${path}`);
  d.close();
  stopAll();
  process.exit(0);
}

/** `--cache`: ten short chat turns (tools off, so each turn is one request), and what the
 *  server's prefix cache reused of each turn's prompt. */
async function cacheReport(d, llama) {
  await d.op("setSettings", { provider: "openai-compatible", baseUrl: `${llama}/v1`, model: MODEL, constrainedCalls: "off" });
  const chat = (await d.op("create", { title: "cache" })).id;
  const asks = ["Hi.", "What is a dataset?", "And a group?", "What is a gauge?", "What is MQTT?",
    "What is a baud rate?", "What is CAN?", "What is Modbus?", "What is a CSV file?", "Thanks."];
  console.log("\nturn | prompt new | prompt cached | output | end");
  let fresh = 0, reused = 0;
  for (const [i, text] of asks.entries()) {
    const turn = await runTurn(d, chat, text);
    // A reply cut by the repetition check never got the server's counts.
    const u = turn.usage.at(-1);
    if (i > 0 && u) { fresh += u.inputTokens; reused += u.cacheReadTokens; }
    console.log(`${i + 1} | ${u ? u.inputTokens : "-"} | ${u ? u.cacheReadTokens : "-"} | ${u ? u.outputTokens : "-"} | ${turn.end}${turn.detail ? `(${turn.detail})` : ""}`);
    check(turn.end !== "hung", `turn ${i + 1} ended (${turn.end})`);
  }
  console.log(`turns 2–10: ${fresh} new prompt tokens, ${reused} reused (${Math.round((100 * reused) / Math.max(1, fresh + reused))} % reused)`);
  d.close();
  const failed = checks.filter((c) => !c.ok).length;
  console.log(`\n${checks.length - failed} passed, ${failed} failed`);
  stopAll();
  process.exit(failed ? 1 : 0);
}

main().catch((e) => {
  console.error(`error: ${e.message}`);
  const failed = checks.filter((c) => !c.ok).length + 1;
  console.log(`\n${checks.length - failed + 1} passed, ${failed} failed`);
  stopAll();
  process.exit(1);
});
