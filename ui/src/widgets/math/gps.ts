/** Offline map math: a local equirectangular projection fitted to a track, lat/lon grid
 *  steps and a scale bar. Accurate enough for tracks of a few hundred km. Pure. */

import { formatTick, placeLabels, type Box } from "./ticks";

export const EARTH_RADIUS_M = 6371008.8;
const DEG = Math.PI / 180;

export interface Projection {
  lat0: number;
  lon0: number;
  /** Metres per pixel. */
  mpp: number;
  cx: number;
  cy: number;
  /** cos(lat0): shrinks longitude degrees away from the equator. */
  k: number;
}

export const validFix = (lat: number, lon: number) =>
  Number.isFinite(lat) && Number.isFinite(lon) && Math.abs(lat) <= 90 && Math.abs(lon) <= 180 && !(lat === 0 && lon === 0);

/** Fits the valid points among the first `count` of lats/lons into w×h pixels with `pad`;
 *  null when no valid point. A single point gets a 100 m wide view. */
export function fitProjection(lats: ArrayLike<number>, lons: ArrayLike<number>, count: number, w: number, h: number, pad = 20): Projection | null {
  let minLat = Infinity, maxLat = -Infinity, minLon = Infinity, maxLon = -Infinity;
  for (let i = 0; i < count; i++) {
    const la = lats[i], lo = lons[i];
    if (!validFix(la, lo)) continue;
    if (la < minLat) minLat = la;
    if (la > maxLat) maxLat = la;
    if (lo < minLon) minLon = lo;
    if (lo > maxLon) maxLon = lo;
  }
  if (minLat > maxLat) return null;
  const lat0 = (minLat + maxLat) / 2;
  const lon0 = (minLon + maxLon) / 2;
  const k = Math.max(Math.cos(lat0 * DEG), 1e-6);
  const spanX = (maxLon - minLon) * DEG * EARTH_RADIUS_M * k;
  const spanY = (maxLat - minLat) * DEG * EARTH_RADIUS_M;
  const availW = Math.max(1, w - 2 * pad), availH = Math.max(1, h - 2 * pad);
  const mpp = Math.max(spanX / availW, spanY / availH, 100 / Math.max(availW, availH));
  return { lat0, lon0, mpp, cx: w / 2, cy: h / 2, k };
}

/** Pixel x of a longitude. */
export function projectX(lon: number, p: Projection): number {
  return p.cx + ((lon - p.lon0) * DEG * EARTH_RADIUS_M * p.k) / p.mpp;
}
/** Pixel y of a latitude (north up). */
export function projectY(lat: number, p: Projection): number {
  return p.cy - ((lat - p.lat0) * DEG * EARTH_RADIUS_M) / p.mpp;
}
export function unprojectX(x: number, p: Projection): number {
  return p.lon0 + ((x - p.cx) * p.mpp) / (DEG * EARTH_RADIUS_M * p.k);
}
export function unprojectY(y: number, p: Projection): number {
  return p.lat0 - ((y - p.cy) * p.mpp) / (DEG * EARTH_RADIUS_M);
}

/** The largest 1/2/5 × 10^n not above x (x > 0). */
export function niceFloor(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) return 0;
  const e = Math.pow(10, Math.floor(Math.log10(x)));
  const m = x / e;
  return (m >= 5 ? 5 : m >= 2 ? 2 : 1) * e;
}

/** A scale bar at most `maxPx` long: its length in metres and pixels, and a label. */
export function scaleBar(mpp: number, maxPx: number): { meters: number; px: number; label: string } {
  const meters = niceFloor(mpp * maxPx);
  const px = mpp > 0 ? meters / mpp : 0;
  const label = meters >= 1000 ? `${+(meters / 1000).toPrecision(3)} km` : `${+meters.toPrecision(3)} m`;
  return { meters, px, label };
}

/** Grid step in degrees giving about `lines` lines over `spanDeg`. */
export function gridStep(spanDeg: number, lines = 4): number {
  return niceFloor(Math.abs(spanDeg) / Math.max(1, lines)) || 1e-6;
}

/** Distance in metres between two fixes (haversine). */
export function distanceM(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const dLat = (lat2 - lat1) * DEG, dLon = (lon2 - lon1) * DEG;
  const a = Math.sin(dLat / 2) ** 2 + Math.cos(lat1 * DEG) * Math.cos(lat2 * DEG) * Math.sin(dLon / 2) ** 2;
  return 2 * EARTH_RADIUS_M * Math.asin(Math.min(1, Math.sqrt(a)));
}

/** A text label on the map: its text, where `text()` draws it (left aligned, middle
 *  baseline) and the box it covers. */
export interface MapLabel {
  text: string;
  x: number;
  y: number;
  box: Box;
}

export interface MapLayout {
  /** The scale bar: from x0 to x1 at y, its label above it. */
  bar: { x0: number; x1: number; y: number; label: MapLabel };
  /** Grid lines (pixels) and the labels drawn for them: latitudes on the left edge,
   *  longitudes along the bottom; a label that would run into the scale bar, the fix
   *  readout (`reserved`), another label or the edge is left out. */
  latLines: number[];
  lonLines: number[];
  lat: MapLabel[];
  lon: MapLabel[];
}

const LABEL_H = 11;

/** Where the map's grid, its labels and its scale bar go, so none of them overlap. `measure`
 *  gives a text's width in px (the 9 px grid font; 10 px for the scale bar's label). */
export function mapLayout(proj: Projection, w: number, h: number, measure: (s: string, px: number) => number, reserved: readonly Box[] = []): MapLayout {
  const sb = scaleBar(proj.mpp, Math.min(120, w / 3));
  const y = h - 12, x1 = w - 10, x0 = x1 - sb.px;
  const lw = measure(sb.label, 10);
  const lx = (x0 + x1) / 2 - lw / 2;
  const barLabel: MapLabel = { text: sb.label, x: lx, y: y - 10, box: { x: lx, y: y - 10 - 6, w: lw, h: 12 } };
  // The bar's box: its label and the bar with its end ticks.
  const barBox: Box = { x: Math.min(x0, lx), y: y - 16, w: Math.max(x1, lx + lw) - Math.min(x0, lx), h: 18 };
  const latTop = unprojectY(0, proj), latBot = unprojectY(h, proj);
  const lonL = unprojectX(0, proj), lonR = unprojectX(w, proj);
  const step = gridStep(Math.max(latTop - latBot, lonR - lonL), 4);
  const lines = (lo: number, hi: number) => {
    const out: number[] = [];
    for (let k = Math.ceil(lo / step); k * step <= hi && out.length < 50; k++) out.push(k * step);
    return out;
  };
  const lats = lines(latBot, latTop), lons = lines(lonL, lonR);
  const bounds: Box = { x: 0, y: 0, w, h };
  const keep = [barBox, ...reserved];
  const label = (text: string, x: number, y: number): MapLabel => ({ text, x, y, box: { x, y: y - LABEL_H / 2, w: measure(text, 9), h: LABEL_H } });
  const latLabels = lats.map((g) => label(formatTick(g, step, "°"), 2, projectY(g, proj) - 6));
  const lonLabels = lons.map((g) => label(formatTick(g, step, "°"), projectX(g, proj) + 2, h - 8));
  // Latitude labels first: a longitude label gives way to them too.
  const lat = placeLabels(latLabels.map((l) => l.box), keep, bounds).map((i) => latLabels[i]);
  const lon = placeLabels(lonLabels.map((l) => l.box), [...keep, ...lat.map((l) => l.box)], bounds).map((i) => lonLabels[i]);
  return {
    bar: { x0, x1, y, label: barLabel },
    latLines: lats.map((g) => projectY(g, proj)),
    lonLines: lons.map((g) => projectX(g, proj)),
    lat,
    lon,
  };
}
