/** Every kind of dashboard tile, one entry each: the kind (the tile's `data-widget-kind`),
 *  the widgets of the project file it draws (as the file spells them), its label, default
 *  size, a description, and what it draws for a tile (which component, with which props).
 *  `dashboard/WidgetView.svelte` draws through this list, `dashboard/layout.ts` takes sizes
 *  and the group-widget mapping from it, and a test walks the widget kinds of the Rust
 *  project model (the generated wire schema) so a kind with no entry fails the build.
 *
 *  Widgets a project can name that this UI has no widget for are `STAND_INS`: drawn as
 *  another kind, the tile says what it stands in for. A kind in neither list (a project from
 *  a newer version) is drawn as `Unsupported.svelte`, which says so.
 *
 *  Components are imported lazily (loaded once, when a tile first needs them), except the
 *  ones other screens import anyway (Plot and DataGrid for Quick plot, Terminal for the
 *  console panel), which would gain nothing from a chunk of their own. */
import type { Component } from "svelte";
import type { Key } from "../lib/i18n/index.svelte";
import type { Dataset, DatasetWidget, Group, GroupWidget, TileView } from "../lib/model";
import Plot from "./Plot.svelte";
import DataGrid from "./DataGrid.svelte";
import Terminal from "./Terminal.svelte";

/** What a tile gives its widget: its group or its dataset, and the datasets it shows. */
export interface TileData {
  group?: Group;
  dataset?: Dataset;
  /** The group's datasets, or the one dataset. */
  datasets: Dataset[];
  /** `datasets` as plot series. */
  series: { id: string; title: string; units: string; interpolation?: "linear" | "step" | "stem" | "none" }[];
  /** A file-name-safe name for exports. */
  name: string;
  /** A dataset's title by id (an XY plot's X axis). */
  titleOf: (id: string) => string;
  /** Whether the docked console is open (terminal tiles then leave their test hooks to it). */
  readonly consoleOpen: boolean;
}

/** A component, loaded once however many tiles ask. */
export type Loader<P extends Record<string, any> = any> = () => Promise<Component<P>>;

/** What a tile draws: a component and its props (typed against each other by `drawing`). */
export interface Drawing {
  load: Loader;
  props: Record<string, unknown>;
}

function lazy<P extends Record<string, any>>(module: () => Promise<{ default: Component<P> }>): Loader<P> {
  let loaded: Promise<Component<P>> | null = null;
  return () => (loaded ??= module().then((m) => m.default));
}

function eager<P extends Record<string, any>>(component: Component<P>): Loader<P> {
  const loaded = Promise.resolve(component);
  return () => loaded;
}

function drawing<P extends Record<string, any>>(load: Loader<P>, props: P): Drawing {
  return { load, props };
}

export const components = {
  Plot: eager(Plot),
  DataGrid: eager(DataGrid),
  Terminal: eager(Terminal),
  XyPlot: lazy(() => import("./XyPlot.svelte")),
  Fft: lazy(() => import("./Fft.svelte")),
  Gauge: lazy(() => import("./Gauge.svelte")),
  Bars: lazy(() => import("./Bars.svelte")),
  Compass: lazy(() => import("./Compass.svelte")),
  Leds: lazy(() => import("./Leds.svelte")),
  Gps: lazy(() => import("./Gps.svelte")),
  Accelerometer: lazy(() => import("./Accelerometer.svelte")),
  Gyroscope: lazy(() => import("./Gyroscope.svelte")),
  Clock: lazy(() => import("./Clock.svelte")),
  Controls: lazy(() => import("./Controls.svelte")),
  Image: lazy(() => import("./Image.svelte")),
  Plot3d: lazy(() => import("./Plot3d.svelte")),
  Waterfall: lazy(() => import("./Waterfall.svelte")),
  Painter: lazy(() => import("./Painter.svelte")),
};

/** The tile's datasets in a grid: what a tile draws when it lacks what its kind needs. */
export function dataGrid(t: TileData): Drawing {
  return drawing(components.DataGrid, { rows: t.datasets });
}

export interface WidgetEntry {
  /** The tile's kind (`data-widget-kind`). */
  kind: string;
  /** The project file's widgets this kind draws: a group's `widget`, a dataset's `widget`,
   *  a dataset tile's `view`. */
  project: { group?: readonly GroupWidget[]; dataset?: DatasetWidget; view?: TileView };
  label: Key;
  description: string;
  /** Default width and height in grid cells (of 12 columns). */
  size: readonly [number, number];
  /** What to draw for a tile, or null when the tile lacks what the kind needs (a dataset
   *  widget on a group tile): the tile then shows its datasets in a grid. */
  draw: (t: TileData) => Drawing | null;
}

export const WIDGETS = [
  {
    kind: "plot",
    project: { view: "plot" },
    label: "widget.view.plot",
    description: "A dataset over time (or over samples); against another dataset when its X axis is one.",
    size: [4, 3],
    draw: (t) => {
      const d = t.dataset;
      if (!d) return drawing(components.Plot, { series: t.series, name: t.name });
      if (d.xAxis?.mode === "dataset")
        return drawing(components.XyPlot, {
          xId: d.xAxis.id,
          yId: d.id,
          xLabel: t.titleOf(d.xAxis.id),
          yLabel: d.units ? `${d.title} (${d.units})` : d.title,
        });
      return drawing(components.Plot, {
        series: t.series,
        name: t.name,
        mode: d.xAxis?.mode === "samples" ? "samples" : "time",
        range: d.min != null && d.max != null ? [d.min, d.max] : null,
        log: d.log ?? false,
        trigger: d.trigger ?? null,
        peakHold: d.peakHold ?? false,
      });
    },
  },
  {
    kind: "multiplot",
    project: { group: ["multiPlot"] },
    label: "widget.group.multiPlot",
    description: "All of a group's datasets on one plot.",
    size: [8, 4],
    draw: (t) => drawing(components.Plot, { series: t.series, name: t.name }),
  },
  {
    kind: "fft",
    project: { view: "fft" },
    label: "widget.view.fft",
    description: "The spectrum of a dataset.",
    size: [4, 3],
    draw: (t) => (t.dataset ? drawing(components.Fft, { dataset: t.dataset }) : null),
  },
  {
    kind: "waterfall",
    project: { view: "waterfall" },
    label: "widget.view.waterfall",
    description: "A dataset's spectrum over time: the newest on top, coloured by power.",
    size: [4, 4],
    draw: (t) => (t.dataset ? drawing(components.Waterfall, { dataset: t.dataset }) : null),
  },
  {
    kind: "datagrid",
    project: { group: ["dataGrid", "none"] },
    label: "widget.group.dataGrid",
    description: "The latest value of each dataset, in a table.",
    size: [4, 4],
    draw: dataGrid,
  },
  {
    kind: "gauge",
    project: { dataset: "gauge" },
    label: "widget.dataset.gauge",
    description: "A dataset's value on a dial.",
    size: [3, 3],
    draw: (t) => (t.dataset ? drawing(components.Gauge, { dataset: t.dataset, kind: "gauge" }) : null),
  },
  {
    kind: "bar",
    project: { group: ["barPanel"], dataset: "bar" },
    label: "widget.dataset.bar",
    description: "Each dataset's value as a bar within its range.",
    size: [3, 3],
    draw: (t) => drawing(components.Bars, { datasets: t.datasets }),
  },
  {
    kind: "compass",
    project: { dataset: "compass" },
    label: "widget.dataset.compass",
    description: "A heading on a compass rose.",
    size: [3, 3],
    draw: (t) => (t.dataset ? drawing(components.Compass, { dataset: t.dataset }) : null),
  },
  {
    kind: "meter",
    project: { dataset: "meter" },
    label: "widget.dataset.meter",
    description: "A dataset's value on a half-circle meter.",
    size: [3, 3],
    draw: (t) => (t.dataset ? drawing(components.Gauge, { dataset: t.dataset, kind: "meter" }) : null),
  },
  {
    kind: "led",
    project: { group: ["ledPanel"], view: "led" },
    label: "widget.view.led",
    description: "A lamp per dataset, lit above its threshold.",
    size: [3, 2],
    draw: (t) => drawing(components.Leds, { datasets: t.datasets }),
  },
  {
    kind: "gps",
    project: { group: ["gps"] },
    label: "widget.group.gps",
    description: "A group's latitude and longitude as a track on a map grid.",
    size: [6, 4],
    draw: (t) => (t.group ? drawing(components.Gps, { group: t.group }) : null),
  },
  {
    kind: "accelerometer",
    project: { group: ["accelerometer"] },
    label: "widget.group.accelerometer",
    description: "A group's X, Y and Z acceleration and their magnitude.",
    size: [6, 4],
    draw: (t) => (t.group ? drawing(components.Accelerometer, { group: t.group }) : null),
  },
  {
    kind: "gyroscope",
    project: { group: ["gyroscope"] },
    label: "widget.group.gyroscope",
    description: "A group's roll, pitch and yaw: rates (°/s) as bars around zero, angles (°) as an attitude indicator.",
    size: [4, 4],
    draw: (t) => (t.group ? drawing(components.Gyroscope, { group: t.group }) : null),
  },
  {
    kind: "terminal",
    project: { group: ["terminal"] },
    label: "widget.group.terminal",
    description: "The device's text, and a line to send to it.",
    size: [8, 4],
    draw: (t) => drawing(components.Terminal, { hooks: !t.consoleOpen }),
  },
  {
    kind: "clock",
    project: { dataset: "clock" },
    label: "widget.dataset.clock",
    description: "A dataset's value as a time of day.",
    size: [3, 2],
    draw: (t) => (t.dataset ? drawing(components.Clock, { dataset: t.dataset }) : null),
  },
  {
    kind: "controls",
    project: { group: ["output"] },
    label: "widget.group.output",
    description: "Buttons, toggles, sliders, knobs and text fields whose script sends to the device.",
    size: [4, 3],
    draw: (t) => (t.group ? drawing(components.Controls, { group: t.group }) : null),
  },
  {
    kind: "plot3d",
    project: { group: ["plot3d"] },
    label: "widget.group.plot3d",
    description: "A group's x, y and z datasets as a trail in 3-D that the mouse orbits and zooms.",
    size: [6, 5],
    draw: (t) => (t.group ? drawing(components.Plot3d, { group: t.group }) : null),
  },
  {
    kind: "painter",
    project: { group: ["painter"] },
    label: "widget.group.painter",
    description: "The group drawn by its own JavaScript, paint(ctx, datasets, w, h), in a sandbox.",
    size: [6, 4],
    draw: (t) => (t.group ? drawing(components.Painter, { group: t.group }) : null),
  },
  {
    kind: "image",
    project: { group: ["image"] },
    label: "widget.group.image",
    description: "The newest JPEG, PNG or WebP picture found in the source's bytes, with its size and rate.",
    size: [6, 4],
    draw: (t) => (t.group ? drawing(components.Image, { group: t.group }) : null),
  },
] as const satisfies readonly WidgetEntry[];

/** Kinds of tile the dashboard draws (the `data-widget-kind` hook). */
export type WidgetKind = (typeof WIDGETS)[number]["kind"];

/** A widget a project can name that this UI draws as another kind, saying so on the tile
 *  (`note`, a `dash.standIn.*` string). */
export interface StandIn {
  group: GroupWidget;
  drawnAs: WidgetKind;
}

export const STAND_INS = [
  { group: "webView", drawnAs: "datagrid" },
] as const satisfies readonly StandIn[];

/** What a group widget a stand-in is for (the `dash.standIn.*` string names it). */
export type StandsFor = (typeof STAND_INS)[number]["group"];

const byKind = new Map<string, WidgetEntry>(WIDGETS.map((w) => [w.kind, w]));

/** The entry for a tile kind; undefined for a kind this version does not know. */
export function widgetFor(kind: string): WidgetEntry | undefined {
  return byKind.get(kind);
}

/** Default size (columns, rows) of a tile of `kind`; a plot's for a kind not known. */
export function sizeOf(kind: string): readonly [number, number] {
  return byKind.get(kind)?.size ?? byKind.get("plot")!.size;
}

const groupKinds = new Map<string, WidgetKind>([
  ...WIDGETS.flatMap((w): [string, WidgetKind][] => ("group" in w.project ? w.project.group.map((g): [string, WidgetKind] => [g, w.kind]) : [])),
  ...STAND_INS.map((s): [string, WidgetKind] => [s.group, s.drawnAs]),
]);

/** The tile kind that draws a group widget: its entry's, a stand-in's, or – for a widget
 *  this version does not know – the widget's own name (drawn as `Unsupported.svelte`). */
export function kindOfGroupWidget(widget: string): string {
  return groupKinds.get(widget) ?? widget;
}

const standIns = new Set<string>(STAND_INS.map((s) => s.group));

/** The group widget a tile stands in for, or null when it draws what was asked. */
export function standInFor(widget: string | undefined): StandsFor | null {
  return widget && standIns.has(widget) ? (widget as StandsFor) : null;
}
