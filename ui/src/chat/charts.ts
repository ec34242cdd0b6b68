/** Charts in the assistant's replies: a fenced block with the info string `chart` whose
 *  body names a window of data and its datasets – never numbers –
 *
 *      ```chart
 *      {"window": {"session": 3, "fromS": 120, "toS": 180}, "datasets": ["Battery/Voltage"]}
 *      ```
 *
 *  The panel draws it from the data itself (`data.series`), so a chart can only show what
 *  was measured. A block that does not parse as such a chart stays what it is, a code block. */

/** Which data a chart shows: `data.*`'s window. */
export interface ChartWindow {
  lastS?: number;
  session?: number;
  fromS?: number;
  toS?: number;
}

export interface ChartSpec {
  window: ChartWindow;
  datasets: string[];
}

export type Segment = { kind: "markdown"; text: string } | { kind: "chart"; spec: ChartSpec; source: string };

/** Datasets one chart draws at most (the backend's own cap). */
export const MAX_CHART_DATASETS = 8;

const finite = (x: unknown): x is number => typeof x === "number" && Number.isFinite(x);

/** The chart a block's body describes, or null when it is not one. */
export function parseChart(body: string): ChartSpec | null {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch {
    return null;
  }
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) return null;
  const { window: w, datasets } = raw as { window?: unknown; datasets?: unknown };
  if (!w || typeof w !== "object" || Array.isArray(w)) return null;
  if (!Array.isArray(datasets) || datasets.length === 0 || datasets.length > MAX_CHART_DATASETS) return null;
  if (!datasets.every((d) => typeof d === "string" && d.trim() !== "" && d.length <= 200)) return null;
  const win = w as Record<string, unknown>;
  const window: ChartWindow = {};
  if (win.session !== undefined) {
    if (!Number.isInteger(win.session) || win.lastS !== undefined) return null;
    window.session = win.session as number;
    for (const k of ["fromS", "toS"] as const) {
      if (win[k] === undefined) continue;
      if (!finite(win[k]) || (win[k] as number) < 0) return null;
      window[k] = win[k] as number;
    }
    if (window.fromS !== undefined && window.toS !== undefined && window.fromS > window.toS) return null;
  } else if (finite(win.lastS) && win.lastS > 0) {
    if (win.fromS !== undefined || win.toS !== undefined) return null;
    window.lastS = win.lastS;
  } else {
    return null;
  }
  return { window, datasets: datasets as string[] };
}

/** A closed ```chart fence: its whole text and its body. */
const FENCE = /^```chart[ \t]*\r?\n([\s\S]*?)\r?\n```[ \t]*$/gm;

/** `text` cut into Markdown and the charts between it, in order. Only a closed fence with a
 *  valid body is a chart; everything else stays in the Markdown. */
export function splitCharts(text: string): Segment[] {
  const out: Segment[] = [];
  let at = 0;
  for (const m of text.matchAll(FENCE)) {
    const spec = parseChart(m[1]);
    if (!spec) continue;
    if (m.index > at) out.push({ kind: "markdown", text: text.slice(at, m.index) });
    out.push({ kind: "chart", spec, source: m[1] });
    at = m.index + m[0].length;
  }
  if (at < text.length || out.length === 0) out.push({ kind: "markdown", text: text.slice(at) });
  return out;
}

/** One dataset's points as `data.series` returns them. */
export interface Line {
  dataset: string;
  units: string;
  t: number[];
  v: number[];
}

/** The lines on one time axis for uPlot: the union of their times, each line's value at
 *  its own times and null elsewhere (a line is drawn through its nulls). */
export function align(lines: Line[]): (number | null)[][] {
  const times = [...new Set(lines.flatMap((l) => l.t))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const columns = lines.map((l) => {
    const col: (number | null)[] = new Array(times.length).fill(null);
    l.t.forEach((t, i) => (col[index.get(t)!] = l.v[i]));
    return col;
  });
  return [times, ...columns];
}
