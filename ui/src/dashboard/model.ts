/** The parts of the project model (docs/project.schema.json) the dashboard reads. */
import type { AlarmBand } from "../widgets/math/alarms";

export type DatasetWidget = "none" | "bar" | "gauge" | "compass" | "meter" | "clock";
export type GroupWidget =
  | "none" | "dataGrid" | "multiPlot" | "accelerometer" | "gyroscope" | "gps" | "plot3d"
  | "barPanel" | "ledPanel" | "terminal" | "painter" | "image" | "webView";
export type Role = "lat" | "lon" | "alt" | "x" | "y" | "z" | "yaw" | "pitch" | "roll";

export interface Dataset {
  id: string;
  title: string;
  units: string;
  widget?: DatasetWidget;
  role?: Role | null;
  graph?: boolean;
  fft?: boolean;
  fftSamples?: number;
  led?: boolean;
  ledThreshold?: number | null;
  log?: boolean;
  min?: number | null;
  max?: number | null;
  alarms?: AlarmBand[];
  xAxis?: { mode: "time" } | { mode: "samples" } | { mode: "dataset"; id: string };
}

export interface Group {
  id: string;
  title: string;
  widget?: GroupWidget;
  datasets: Dataset[];
}

/** Which of a dataset's views a tile shows (the backend's `TileView`). */
export type TileView = "widget" | "plot" | "fft" | "led";

export interface Tile {
  group?: string | null;
  dataset?: string | null;
  view?: TileView | null;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Workspace {
  id: string;
  title: string;
  tiles: Tile[];
}

export interface Project {
  title: string;
  groups: Group[];
  workspaces?: Workspace[];
  sources?: { id: string; title: string }[];
}

/** Kinds of tile the dashboard draws (the `data-widget-kind` hook). */
export type WidgetKind =
  | "plot" | "multiplot" | "fft" | "datagrid" | "gauge" | "bar" | "compass" | "meter"
  | "led" | "gps" | "accelerometer" | "gyroscope" | "terminal" | "clock";

export function allDatasets(p: Project | null): Dataset[] {
  return p?.groups?.flatMap((g) => g.datasets ?? []) ?? [];
}
