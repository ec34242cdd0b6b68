// Pure helpers of the screens: recent files, rates, status strings, error lines, formats.
import { describe, expect, it } from "vitest";
import { CommandError } from "../src/lib/transport/types";
import { formatCount, parseStatus, rates, smooth, totalSample } from "../src/screens/status";
import {
  RECENT_MAX, errorLine, errorText, formatDuration, isUnknownCommand, optNumber, parseRecent, parseTags,
  pushRecent, sampleFrames,
} from "../src/screens/util";
import { exists } from "../src/screens/project/selection";
import { exportName, type ExportFormat } from "../src/screens/files";

describe("recent files", () => {
  it("puts the newest first and removes the older duplicate", () => {
    expect(pushRecent(["/a.json", "/b.json", "/c.json"], "/b.json")).toEqual(["/b.json", "/a.json", "/c.json"]);
  });
  it("caps the list at ten", () => {
    let list: string[] = [];
    for (let i = 0; i < 15; i++) list = pushRecent(list, `/p${i}.json`);
    expect(list).toHaveLength(RECENT_MAX);
    expect(list[0]).toBe("/p14.json");
    expect(list.at(-1)).toBe("/p5.json");
  });
  it("treats Windows paths case-insensitively and ignores blank paths", () => {
    expect(pushRecent(["C:\\Proj\\A.json"], "c:\\proj\\a.json")).toEqual(["c:\\proj\\a.json"]);
    expect(pushRecent(["/a"], "  ")).toEqual(["/a"]);
    expect(pushRecent(["/Data/a.json"], "/data/a.json")).toHaveLength(2);
  });
  it("reads stored lists defensively", () => {
    expect(parseRecent(null)).toEqual([]);
    expect(parseRecent("not json")).toEqual([]);
    expect(parseRecent('{"a":1}')).toEqual([]);
    expect(parseRecent('["/a", 3, "", "/b"]')).toEqual(["/a", "/b"]);
  });
});

describe("frames per second from counters", () => {
  it("is the frame delta over the time delta", () => {
    expect(rates({ atMs: 1000, frames: 100, bytes: 0 }, { atMs: 1500, frames: 150, bytes: 2048 })).toEqual({ framesPerS: 100, bytesPerS: 4096 });
  });
  it("gives nothing without a previous sample, for zero time or when counters reset", () => {
    expect(rates(null, { atMs: 1, frames: 1, bytes: 1 })).toBeNull();
    expect(rates({ atMs: 5, frames: 1, bytes: 1 }, { atMs: 5, frames: 9, bytes: 9 })).toBeNull();
    expect(rates({ atMs: 0, frames: 500, bytes: 10 }, { atMs: 500, frames: 3, bytes: 20 })).toBeNull();
  });
  it("sums every source", () => {
    const s = totalSample({ connected: true, runningActions: [], replayEnded: false, sources: [{ frames: 3, bytes: 10 } as any, { frames: 4, bytes: 5 } as any] }, 7);
    expect(s).toEqual({ atMs: 7, frames: 7, bytes: 15 });
  });
  it("smooths towards the new value", () => {
    expect(smooth(null, 10)).toBe(10);
    expect(smooth(10, 20, 0.5)).toBe(15);
  });
  it("formats big counters", () => {
    expect(formatCount(9999)).toBe("9999");
    expect(formatCount(12345)).toBe("12.3 k");
    expect(formatCount(2_500_000)).toBe("2.5 M");
  });
});

describe("source status strings", () => {
  it("reads a reconnect with its attempt, delay and reason", () => {
    expect(parseStatus("reconnecting (attempt 3, next try in 2.0 s): port busy: /dev/ttyUSB0")).toEqual({
      kind: "reconnecting", attempt: 3, retryInS: 2, reason: "port busy: /dev/ttyUSB0",
    });
  });
  it("reads errors and plain states", () => {
    expect(parseStatus("error: no such device")).toEqual({ kind: "error", reason: "no such device" });
    expect(parseStatus("connected").kind).toBe("connected");
    expect(parseStatus("finished").kind).toBe("finished");
    expect(parseStatus("weird").kind).toBe("unknown");
  });
});

describe("compile error lines", () => {
  it("finds the line in Lua, JavaScript and generic messages", () => {
    expect(errorLine(`[string "parser"]:12: unexpected symbol near 'end'`)).toBe(12);
    expect(errorLine("SyntaxError: Unexpected token '}' at line 7")).toBe(7);
    expect(errorLine("ReferenceError: x is not defined\n    at parse (<eval>:4:9)")).toBe(4);
    expect(errorLine("parser.lua:3: attempt to index a nil value")).toBe(3);
    expect(errorLine("input:5:10: expected expression")).toBe(5);
  });
  it("gives null when there is no line", () => {
    expect(errorLine("parse must return an array")).toBeNull();
    expect(errorLine("")).toBeNull();
    expect(errorLine(null)).toBeNull();
  });
});

describe("error text", () => {
  it("keeps the backend's meaning and details, without code marks or the field's path", () => {
    const e = new CommandError({ code: "invalid_params", message: "invalid source field `changes.connection.baud`: expected u32", path: "changes.connection.baud" });
    expect(errorText(e)).toBe("invalid source field “changes.connection.baud”: expected u32");
    expect(errorText(new Error("connection to Sextant lost"))).toBe("connection to Sextant lost");
  });
  // What a new user read, and what they read now: no command names, no error-code words.
  it.each([
    ["not connected; run io.connect first", "not connected; run “Connect the devices” first"],
    ["Error: NotFound: no group has id `Bench`", "no group has id “Bench”"],
    ["notAllowed: a headless caller may not run project_source_add", "a headless caller may not run “Add a device”"],
    ["no sessions database is set; choose a file with sessions.setDatabase", "no sessions database is set; choose a file with “Choose where recordings are kept”"],
    ["could not open /dev/ttyUSB0: No such file or directory", "could not open /dev/ttyUSB0: No such file or directory"],
  ])("%s", (backend, person) => {
    expect(errorText(new CommandError({ code: "failed", message: backend }))).toBe(person);
  });
  it("recognises an unknown command", () => {
    expect(isUnknownCommand(new CommandError({ code: "unknown_command", message: "no command io.listSerialPorts" }))).toBe(true);
    expect(isUnknownCommand(new CommandError({ code: "failed", message: "x" }))).toBe(false);
  });
});

describe("durations", () => {
  it("formats seconds as m:ss.s and h:mm:ss.s", () => {
    expect(formatDuration(0)).toBe("0:00.0");
    expect(formatDuration(5.25)).toBe("0:05.3");
    expect(formatDuration(59.96)).toBe("1:00.0");
    expect(formatDuration(3723.4)).toBe("1:02:03.4");
  });
  it("shows a dash for missing or nonsense values", () => {
    expect(formatDuration(null)).toBe("–");
    expect(formatDuration(NaN)).toBe("–");
    expect(formatDuration(-1)).toBe("–");
  });
});

describe("small parsers", () => {
  it("tags: trimmed, unique, non-empty", () => {
    expect(parseTags(" bench, firmware 1.2,,bench ")).toEqual(["bench", "firmware 1.2"]);
  });
  it("sample frames: one per line, CRLF tolerated, trailing blank dropped, inner blank kept", () => {
    expect(sampleFrames("1,2\r\n\n3,4\n\n")).toEqual(["1,2", "", "3,4"]);
  });
  it("optional numbers", () => {
    expect(optNumber("")).toBeNull();
    expect(optNumber(" 2.5 ")).toBe(2.5);
    expect(optNumber("abc")).toBeUndefined();
  });
});

describe("editor selection", () => {
  const p = { sources: [{ id: "src-1" }], groups: [{ id: "g1", datasets: [{ id: "ds-1" }] }], actions: [], workspaces: [] };
  it("knows whether the selected object still exists", () => {
    expect(exists({ kind: "dataset", id: "ds-1" }, p)).toBe(true);
    expect(exists({ kind: "dataset", id: "ds-9" }, p)).toBe(false);
    expect(exists({ kind: "parser", id: "src-1" }, p)).toBe(true);
    expect(exists({ kind: "addGroup" }, p)).toBe(true);
  });
});

describe("a session export's file name", () => {
  const cases: [string, ExportFormat, string][] = [
    ["session-3.csv", "mcap", "session-3.mcap"],
    ["session-3.mcap", "parquet", "session-3.parquet"],
    ["/data/run.PARQUET", "csv", "/data/run.csv"],
    ["run.v2", "mcap", "run.v2.mcap"],
    ["", "parquet", ".parquet"],
  ];
  it.each(cases)("%s as %s is %s", (path, format, want) => {
    expect(exportName(path, format)).toBe(want);
  });
  it("switching back and forth never stacks extensions", () => {
    let name = "bench.csv";
    for (const f of ["mcap", "parquet", "csv", "mcap"] as ExportFormat[]) name = exportName(name, f);
    expect(name).toBe("bench.mcap");
  });
});
