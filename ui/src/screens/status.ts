/** Pure helpers for live connection status (io.status): rates from counter deltas and
 *  the meaning of a source's status string. What `io.status` returns is generated from
 *  the Rust types (`sextant_runtime::commands::IoStatus`, `SourceStatus`). */
import type { IoStatus, SourceStatus } from "../lib/wire/types.gen";

export type { IoStatus, SourceStatus };

export interface Sample {
  /** performance.now() when the status arrived, ms. */
  atMs: number;
  frames: number;
  bytes: number;
}

export interface Rates {
  framesPerS: number;
  bytesPerS: number;
}

/** Rates between two samples. A counter that went backwards (reconnect resets it) or a
 *  zero interval gives null: better no number than a wrong one. */
export function rates(prev: Sample | null, cur: Sample): Rates | null {
  if (!prev) return null;
  const dt = (cur.atMs - prev.atMs) / 1000;
  if (!(dt > 0)) return null;
  const df = cur.frames - prev.frames;
  const db = cur.bytes - prev.bytes;
  if (df < 0 || db < 0) return null;
  return { framesPerS: df / dt, bytesPerS: db / dt };
}

/** Sums every source's counters into one sample. */
export function totalSample(s: IoStatus, atMs: number): Sample {
  let frames = 0;
  let bytes = 0;
  for (const src of s.sources) {
    frames += src.frames ?? 0;
    bytes += src.bytes ?? 0;
  }
  return { atMs, frames, bytes };
}

/** Exponential smoothing so the number on screen does not flicker at 2 Hz polling. */
export function smooth(prev: number | null, next: number, alpha = 0.5): number {
  return prev === null || !Number.isFinite(prev) ? next : prev + alpha * (next - prev);
}

export type StatusKind = "connecting" | "connected" | "reconnecting" | "error" | "finished" | "closed" | "unknown";

export interface ParsedStatus {
  kind: StatusKind;
  attempt?: number;
  retryInS?: number;
  reason?: string;
}

/** Reads the backend's status string, e.g.
 *  `reconnecting (attempt 3, next try in 2.0 s): port busy` or `error: no such device`. */
export function parseStatus(text: string): ParsedStatus {
  const t = text.trim();
  const re = /^reconnecting \(attempt (\d+), next try in ([\d.]+) s\):\s*(.*)$/s;
  const m = re.exec(t);
  if (m) return { kind: "reconnecting", attempt: Number(m[1]), retryInS: Number(m[2]), reason: m[3] };
  if (t.startsWith("reconnecting")) return { kind: "reconnecting", reason: t.replace(/^reconnecting:?\s*/, "") };
  if (t.startsWith("error")) return { kind: "error", reason: t.replace(/^error:?\s*/, "") };
  if (["connecting", "connected", "finished", "closed"].includes(t)) return { kind: t as StatusKind };
  return { kind: "unknown", reason: t };
}

/** The connection as a person should read it, from the sources' own status – the same in
 *  the sidebar and on the Connect screen. A run whose only source is reconnecting is not
 *  "connected". */
export type Overall = "disconnected" | "connected" | "partly" | "connecting" | "reconnecting" | "error" | "finished";

export function overall(s: IoStatus | null | undefined): Overall {
  if (!s?.connected) return "disconnected";
  // A replay held at its end still answers (to be sought in), but nothing is live.
  if (s.replayEnded) return "finished";
  const kinds = (s.sources ?? []).map((src) => parseStatus(src.status).kind);
  if (kinds.length === 0 || kinds.every((k) => k === "connected")) return "connected";
  if (kinds.some((k) => k === "connected")) return "partly";
  for (const k of ["connecting", "reconnecting", "error"] as const) if (kinds.includes(k)) return k;
  return "finished";
}

/** Whether any data can be flowing (every source or some of them connected). */
export function isLive(o: Overall): boolean {
  return o === "connected" || o === "partly";
}

/** The badge colour of an overall state. */
export function overallTone(o: Overall): "ok" | "warn" | "error" | "" {
  if (o === "connected") return "ok";
  if (o === "partly" || o === "connecting" || o === "reconnecting") return "warn";
  return o === "error" ? "error" : "";
}

/** 1234567 → "1.2 M", for counters that grow without bound. */
export function formatCount(n: number): string {
  if (!Number.isFinite(n)) return "–";
  const a = Math.abs(n);
  if (a < 10_000) return String(Math.round(n));
  if (a < 1e6) return `${(n / 1e3).toFixed(1)} k`;
  if (a < 1e9) return `${(n / 1e6).toFixed(1)} M`;
  return `${(n / 1e9).toFixed(2)} G`;
}

export function formatBytes(n: number): string {
  if (!Number.isFinite(n)) return "–";
  if (n < 1024) return `${Math.round(n)} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  if (n < 1024 ** 3) return `${(n / 1024 ** 2).toFixed(1)} MiB`;
  return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}

export function formatRate(perS: number | null): string {
  if (perS === null || !Number.isFinite(perS)) return "–";
  return perS >= 100 ? String(Math.round(perS)) : perS.toFixed(1);
}

/** Since when a live run received no byte: the byte count last seen and when it changed. */
export interface Quiet {
  bytes: number;
  sinceMs: number;
}

/** The quiet record after a status read at `nowMs`: reset when bytes arrived (or the run
 *  is not live), kept while the count stands still. */
export function quietSince(prev: Quiet, s: IoStatus | null | undefined, nowMs: number): Quiet {
  const bytes = (s?.sources ?? []).reduce((n, src) => n + src.bytes, 0);
  if (!s?.connected || bytes !== prev.bytes || prev.sinceMs === 0) return { bytes, sinceMs: nowMs };
  return prev;
}

/** What the dashboard says while no data arrives: connect a device, or – when one is
 *  connected but silent – that it is connected and how long nothing came. */
export function noDataHint(s: IoStatus | null | undefined, quiet: Quiet, nowMs: number): { key: "dash.noData" | "dash.quiet" | "dash.connecting" | "dash.replayEnded"; seconds: number } {
  const o = overall(s);
  if (o === "finished") return { key: "dash.replayEnded", seconds: 0 };
  if (isLive(o)) return { key: "dash.quiet", seconds: Math.max(0, Math.round((nowMs - quiet.sinceMs) / 1000)) };
  if (o === "connecting" || o === "reconnecting") return { key: "dash.connecting", seconds: 0 };
  return { key: "dash.noData", seconds: 0 };
}

/** What the Connect screen says after a connect, from the sources' own state: "Connected"
 *  only when they are; otherwise that they are still connecting, or why they are not. */
export function connectOutcome(s: IoStatus | null | undefined, starting = false): { tone: "ok" | "warn" | "error" | ""; key: "connect.connectedInfo" | "connect.partlyInfo" | "connect.connectingInfo" | "connect.notConnectedInfo" | "connect.failedInfo" | "connect.finishedInfo"; reason?: string } {
  const o = starting ? "connecting" : overall(s);
  const reason = (s?.sources ?? []).map((src) => parseStatus(src.status)).find((p) => p.reason)?.reason;
  switch (o) {
    case "connected":
      return { tone: "ok", key: "connect.connectedInfo" };
    case "partly":
      return { tone: "warn", key: "connect.partlyInfo", reason };
    case "connecting":
      return { tone: "", key: "connect.connectingInfo" };
    case "reconnecting":
      return { tone: "warn", key: "connect.notConnectedInfo", reason };
    // Not retried (a wrong password, a bad setting): saying "keeps trying" would be false.
    case "error":
      return { tone: "error", key: "connect.failedInfo", reason };
    case "finished":
      return { tone: "", key: "connect.finishedInfo" };
    default:
      return { tone: "", key: "connect.connectingInfo" };
  }
}
