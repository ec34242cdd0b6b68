import { describe, expect, test } from "vitest";
import { align, parseChart, splitCharts } from "../src/chat/charts";

describe("chart blocks in a reply", () => {
  test("a closed chart fence with a window and datasets is a chart, between its Markdown", () => {
    const text = 'Here it is:\n\n```chart\n{"window": {"session": 3, "fromS": 1, "toS": 2}, "datasets": ["Battery/Voltage"]}\n```\n\nIt dips twice.';
    const s = splitCharts(text);
    expect(s.map((x) => x.kind)).toEqual(["markdown", "chart", "markdown"]);
    expect(s[1]).toMatchObject({ spec: { window: { session: 3, fromS: 1, toS: 2 }, datasets: ["Battery/Voltage"] } });
    expect(s[0]).toEqual({ kind: "markdown", text: "Here it is:\n\n" });
    expect(s[2]).toEqual({ kind: "markdown", text: "\n\nIt dips twice." });
  });

  test.each([
    ["not JSON", "window: last 10 s"],
    ["no window", '{"datasets": ["a"]}'],
    ["no datasets", '{"window": {"lastS": 5}, "datasets": []}'],
    ["too many datasets", JSON.stringify({ window: { lastS: 5 }, datasets: Array.from({ length: 9 }, (_, i) => `d${i}`) })],
    ["both live and a session", '{"window": {"lastS": 5, "session": 1}, "datasets": ["a"]}'],
    ["a range on live data", '{"window": {"lastS": 5, "fromS": 1}, "datasets": ["a"]}'],
    ["a range backwards", '{"window": {"session": 1, "fromS": 5, "toS": 1}, "datasets": ["a"]}'],
    ["a negative time", '{"window": {"session": 1, "fromS": -1}, "datasets": ["a"]}'],
    ["a session that is no integer", '{"window": {"session": 1.5}, "datasets": ["a"]}'],
    ["numbers instead of names", '{"window": {"lastS": 5}, "datasets": [3.3, 3.1]}'],
    ["points of its own", '[{"t": 1, "v": 3.3}]'],
  ])("%s is not a chart: the block stays Markdown", (_, body) => {
    expect(parseChart(body)).toBeNull();
    const s = splitCharts("```chart\n" + body + "\n```");
    expect(s).toEqual([{ kind: "markdown", text: "```chart\n" + body + "\n```" }]);
  });

  test("an unclosed fence, as while streaming, is not a chart yet", () => {
    expect(splitCharts('```chart\n{"window": {"lastS": 5}, "datasets": ["a"]}').map((x) => x.kind)).toEqual(["markdown"]);
  });

  test("lines on one time axis, with nulls where a line has no sample", () => {
    expect(
      align([
        { dataset: "a", units: "", t: [0, 1, 2], v: [1, 2, 3] },
        { dataset: "b", units: "", t: [1, 3], v: [5, 6] },
      ]),
    ).toEqual([
      [0, 1, 2, 3],
      [1, 2, 3, null],
      [null, 5, null, 6],
    ]);
  });
});
