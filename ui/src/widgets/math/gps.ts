/** Offline map math: a local equirectangular projection fitted to a track, lat/lon grid
 *  steps and a scale bar. Accurate enough for tracks of a few hundred km. Pure. */

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
