/** The tile menu's pure part: which project settings a dashboard tile offers, and turning
 *  what the person typed into the `changes` of a `project.dataset.update` (the same command
 *  and patch the project editor's dataset form sends, so undo and the assistant see it).
 *
 *  Only fields the project model has (`Dataset` in `lib/wire/types.gen.ts`): `min`/`max`
 *  (the y range of a time plot, the scale of a gauge, meter or bar), `units`, and an FFT
 *  tile's `fftSamples` (its window – the FFT's own points), and a plot's oscilloscope
 *  settings: `interpolation` (a multiplot's too, per series), `log` (a log y axis),
 *  `peakHold` and, on a time plot, the `trigger` (mode, edge, level, pre-trigger share;
 *  the dataset it watches is set in the project editor and kept here). The model has no
 *  per-plot points; a plot's points follow the dashboard's Points setting and the menu
 *  says so. Groups have no plot settings of their own: a group tile offers its datasets'
 *  settings, one section each. */
import type { Dataset, Group } from "../../lib/model";
import type { Key } from "../strings";

export type Field = "range" | "units" | "window" | "join" | "log" | "peaks" | "trigger";

export const INTERPOLATIONS = ["linear", "step", "stem", "none"] as const;
export type InterpolationKind = (typeof INTERPOLATIONS)[number];
export const TRIGGER_MODES = ["off", "auto", "normal", "single"] as const;
export type TriggerChoice = (typeof TRIGGER_MODES)[number];

/** How the range reads when it is not fixed: a plot fits its data, a gauge or bar falls
 *  back to 0–100 (`widgets/math/scale.ts` `rangeOf`). */
export type AutoRange = "fit" | "default";

export interface Section {
  dataset: Dataset;
  fields: Field[];
}

export interface TileMenu {
  sections: Section[];
  /** Which "automatic" range the tile has (when it offers a range). */
  auto: AutoRange;
  /** Whether the tile draws as many points as the dashboard's Points setting says. */
  followsPoints: boolean;
}

/** What the menu needs of a tile (`layout.ts` `TileSpec`). */
export interface TileLike {
  kind: string;
  datasetRef?: Dataset;
  groupRef?: Group;
}

/** FFT windows offered: powers of two the FFT widget draws unchanged (8…65536). */
export const FFT_WINDOWS = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] as const;

/** The settings a tile offers, or null when it offers none (the menu button is not shown). */
export function menuFor(tile: TileLike): TileMenu | null {
  const datasets = tile.datasetRef ? [tile.datasetRef] : (tile.groupRef?.datasets ?? []);
  if (!datasets.length) return null;
  const each = (fields: Field[]): Section[] => datasets.map((dataset) => ({ dataset, fields }));
  switch (tile.kind) {
    case "plot": {
      const d = tile.datasetRef;
      // A plot against another dataset (XY) draws both axes from the data: units only.
      const xy = d?.xAxis?.mode === "dataset";
      const time = (d?.xAxis?.mode ?? "time") === "time";
      const fields: Field[] = d && !xy ? ["range", "units", "join", "log", "peaks", ...(time ? (["trigger"] as Field[]) : [])] : ["units"];
      return { sections: each(fields), auto: "fit", followsPoints: true };
    }
    case "multiplot":
      // One shared y axis fitted to the data (or each series scaled on its own): no range.
      return { sections: each(["units", "join"]), auto: "fit", followsPoints: true };
    case "fft":
    case "waterfall":
      return tile.datasetRef ? { sections: each(["units", "window"]), auto: "fit", followsPoints: false } : null;
    case "gauge":
    case "meter":
    case "bar":
      return { sections: each(["range", "units"]), auto: "default", followsPoints: false };
    default:
      return null;
  }
}

/** What the form holds for one dataset (text as typed). */
export interface Draft {
  fixed: boolean;
  min: string;
  max: string;
  units: string;
  window: string;
  interpolation: InterpolationKind;
  log: boolean;
  peakHold: boolean;
  trigger: TriggerChoice;
  edge: "rising" | "falling";
  level: string;
  /** Percent of the window before the edge. */
  pre: string;
}

export function draftOf(d: Dataset): Draft {
  // Either bound set is a fixed range (a gauge reads a lone bound; a plot needs both).
  const fixed = d.min != null || d.max != null;
  return {
    fixed,
    min: d.min != null ? String(d.min) : "",
    max: d.max != null ? String(d.max) : "",
    units: d.units ?? "",
    window: String(d.fftSamples ?? 1024),
    interpolation: (d.interpolation ?? "linear") as InterpolationKind,
    log: d.log ?? false,
    peakHold: d.peakHold ?? false,
    trigger: d.trigger ? ((d.trigger.mode ?? "auto") as TriggerChoice) : "off",
    edge: d.trigger?.edge ?? "rising",
    level: d.trigger ? String(d.trigger.level) : "0",
    pre: String(Math.round((d.trigger?.preTrigger ?? 0.5) * 1000) / 10),
  };
}

/** A finite number written out in full ("1.5", "-2", "1e3"); anything else is undefined
 *  (empty, "abc", "1,5", "Infinity", "0x10" – what a person did not mean as a number). */
export function parseNumber(text: string): number | undefined {
  const s = text.trim();
  if (!/^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(s)) return undefined;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

export type Errors = Partial<Record<"min" | "max" | "window" | "level" | "pre", Key>>;

export type Built = { ok: true; changes: Record<string, unknown> } | { ok: false; errors: Errors };

/** The `changes` for one dataset from its draft: only the fields offered and changed (an
 *  empty object when nothing changed). Bad input refuses the whole section, with a message
 *  per field, so nothing half-applies. */
export function buildChanges(d: Dataset, fields: readonly Field[], draft: Draft): Built {
  const errors: Errors = {};
  const changes: Record<string, unknown> = {};
  if (fields.includes("range")) {
    if (!draft.fixed) {
      // Automatic: no fixed range – both bounds cleared (merge patch: null removes).
      if (d.min != null) changes.min = null;
      if (d.max != null) changes.max = null;
    } else {
      const lo = parseNumber(draft.min), hi = parseNumber(draft.max);
      if (lo === undefined) errors.min = draft.min.trim() ? "tile.err.number" : "tile.err.required";
      if (hi === undefined) errors.max = draft.max.trim() ? "tile.err.number" : "tile.err.required";
      if (lo !== undefined && hi !== undefined) {
        if (lo >= hi) errors.max = "tile.err.order";
        else {
          if (lo !== d.min) changes.min = lo;
          if (hi !== d.max) changes.max = hi;
        }
      }
    }
  }
  if (fields.includes("units")) {
    const units = draft.units.trim();
    if (units !== (d.units ?? "")) changes.units = units;
  }
  if (fields.includes("window")) {
    const n = parseNumber(draft.window);
    // The listed sizes, or the dataset's own (kept as it is).
    if (n === undefined || (n !== d.fftSamples && !(FFT_WINDOWS as readonly number[]).includes(n))) errors.window = "tile.err.window";
    else if (n !== d.fftSamples) changes.fftSamples = n;
  }
  if (fields.includes("join") && draft.interpolation !== (d.interpolation ?? "linear")) changes.interpolation = draft.interpolation;
  if (fields.includes("log") && draft.log !== (d.log ?? false)) changes.log = draft.log;
  if (fields.includes("peaks") && draft.peakHold !== (d.peakHold ?? false)) changes.peakHold = draft.peakHold;
  if (fields.includes("trigger")) {
    if (draft.trigger === "off") {
      if (d.trigger) changes.trigger = null;
    } else {
      const level = parseNumber(draft.level), pre = parseNumber(draft.pre);
      if (level === undefined) errors.level = draft.level.trim() ? "tile.err.number" : "tile.err.required";
      if (pre === undefined || pre < 0 || pre > 100) errors.pre = "tile.err.percent";
      if (level !== undefined && pre !== undefined && pre >= 0 && pre <= 100) {
        // The whole trigger (a merge patch would keep keys left out); the dataset it
        // watches is kept as the project has it.
        const next = { dataset: d.trigger?.dataset ?? null, edge: draft.edge, level, preTrigger: pre / 100, mode: draft.trigger };
        const cur = d.trigger;
        const same =
          cur && (cur.edge ?? "rising") === next.edge && cur.level === next.level && Math.abs((cur.preTrigger ?? 0.5) - next.preTrigger) < 1e-9 && (cur.mode ?? "auto") === next.mode;
        if (!same) changes.trigger = next;
      }
    }
  }
  return Object.keys(errors).length ? { ok: false, errors } : { ok: true, changes };
}

/** One `project.dataset.update` per dataset that changed, or the errors by dataset id when
 *  any section is refused (then nothing is sent). */
export function buildUpdates(
  menu: TileMenu,
  drafts: Record<string, Draft>,
): { ok: true; updates: { id: string; changes: Record<string, unknown> }[] } | { ok: false; errors: Record<string, Errors> } {
  const updates: { id: string; changes: Record<string, unknown> }[] = [];
  const errors: Record<string, Errors> = {};
  for (const s of menu.sections) {
    const draft = drafts[s.dataset.id] ?? draftOf(s.dataset);
    const r = buildChanges(s.dataset, s.fields, draft);
    if (!r.ok) errors[s.dataset.id] = r.errors;
    else if (Object.keys(r.changes).length) updates.push({ id: s.dataset.id, changes: r.changes });
  }
  return Object.keys(errors).length ? { ok: false, errors } : { ok: true, updates };
}
