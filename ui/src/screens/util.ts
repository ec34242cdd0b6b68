/** Small pure helpers shared by the screens: recent-file lists, error text, compile-error
 *  lines, durations and dates. Kept free of Svelte and the backend so tests can pin them. */
import { t, type Key } from "../lib/i18n/index.svelte";
import { CommandError } from "../lib/transport/types";
import type { ErrorCode } from "../lib/wire/types.gen";
import { TITLED, titleKey } from "../chat/commandTitles";

export const RECENT_MAX = 10;

/** `path` moved to the front; duplicates removed (same path, ignoring trailing slashes
 *  and, on Windows-style paths, case); at most RECENT_MAX kept. */
export function pushRecent(list: readonly string[], path: string, max = RECENT_MAX): string[] {
  const p = path.trim();
  if (!p) return list.slice(0, max);
  const key = (s: string) => {
    const k = s.trim().replace(/[\\/]+$/, "");
    return /^[a-zA-Z]:[\\/]/.test(k) || k.includes("\\") ? k.toLowerCase().replace(/\//g, "\\") : k;
  };
  const k = key(p);
  return [p, ...list.filter((x) => key(x) !== k)].slice(0, max);
}

/** Reads a stored list, dropping anything that is not a non-empty string. */
export function parseRecent(raw: string | null, max = RECENT_MAX): string[] {
  try {
    const v = JSON.parse(raw ?? "[]");
    if (!Array.isArray(v)) return [];
    return v.filter((x): x is string => typeof x === "string" && x.trim() !== "").slice(0, max);
  } catch {
    return [];
  }
}

/** The text to show for a failed call: the backend's message verbatim, with the offending
 *  parameter path when known (the machine code stays out of what a person reads). */
export function errorText(e: unknown): string {
  // The person's own no to a question: said in their language, not the question again.
  if (e instanceof CommandError && e.code === "denied") return t("consent.declined");
  if (e instanceof CommandError) return plainMessage(e.message);
  if (e instanceof Error) return plainMessage(e.message);
  return plainMessage(String(e));
}

/** Every error code, so none is ever shown as a word ("NotFound: …"). */
const CODES: Record<ErrorCode, true> = {
  unknownCommand: true, invalidParams: true, notAllowed: true, denied: true, failed: true, notFound: true, badRequest: true, needsConfirmation: true,
};
const CODE_PREFIX = new RegExp(`^(?:Error:\\s*)?(?:${Object.keys(CODES).map((c) => `${c}|${c[0].toUpperCase()}${c.slice(1)}`).join("|")}):\\s*`);
/** A command's name as the registry or the model's tools spell it (dotted or with `_`). */
const COMMAND = new RegExp(`\\b(?:${[...TITLED].sort((a, b) => b.length - a.length).map((n) => n.replace(/\./g, "[._]")).join("|")})\\b`, "g");

/** A backend message as a person reads it: the backend writes for every caller (a script,
 *  the model), naming commands and codes; a person gets the command's plain title instead of
 *  its name, no error-code word, and names quoted rather than in code marks. The meaning and
 *  the details (a path, a line, the device's own error) are kept. */
export function plainMessage(message: string): string {
  return message
    .replace(CODE_PREFIX, "")
    .replace(COMMAND, (name) => `“${t(titleKey(name.replace(/_/g, ".")))}”`)
    .replace(/`([^`]+)`/g, "“$1”");
}

export function isUnknownCommand(e: unknown): boolean {
  return e instanceof CommandError && e.code === "unknownCommand";
}

/** The 1-based line a compile/runtime error points at, from its text when the backend
 *  gave no `line`: Lua `[string "parser"]:12: …`, `:12:` generally, JS `line 12`,
 *  `at <anonymous>:12:5` / `<eval>:12:5`. */
export function errorLine(message: string | null | undefined): number | null {
  if (!message) return null;
  const patterns = [
    /\[string "[^"]*"\]:(\d+):/,
    /\bline[ :]+(\d+)/i,
    /<(?:anonymous|eval|input)>:(\d+)(?::\d+)?/,
    /\.(?:lua|js):(\d+)/,
    /:(\d+):\d+\b/,
    /:(\d+):\s/,
  ];
  for (const re of patterns) {
    const m = re.exec(message);
    if (m) {
      const n = Number(m[1]);
      if (n > 0) return n;
    }
  }
  return null;
}

/** Seconds as `h:mm:ss.s` / `m:ss.s`; `–` for nothing or nonsense. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return "–";
  const tenths = Math.round(seconds * 10);
  const h = Math.floor(tenths / 36000);
  const m = Math.floor((tenths % 36000) / 600);
  const s = (tenths % 600) / 10;
  const ss = s.toFixed(1).padStart(4, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${ss}` : `${m}:${ss}`;
}

/** Local date and time, ISO-like so it sorts and reads the same in every language. */
export function formatDate(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** Comma-separated tags typed by a person → trimmed, unique, non-empty. */
export function parseTags(text: string): string[] {
  const out: string[] = [];
  for (const t of text.split(",")) {
    const s = t.trim();
    if (s && !out.includes(s)) out.push(s);
  }
  return out;
}

/** Sample frames typed one per line (a trailing empty line is not a frame). */
export function sampleFrames(text: string): string[] {
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  while (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/** A number field: "" → null, otherwise a finite number or undefined for invalid. */
export function optNumber(text: string): number | null | undefined {
  const s = text.trim();
  if (s === "") return null;
  const n = Number(s);
  return Number.isFinite(n) ? n : undefined;
}

/** The file name at the end of a path. */
export function baseName(path: string): string {
  return path.split(/[\\/]/).pop() || path;
}

/** Largest project file a browser drop sends as text (projects are kilobytes; this stops
 *  a dropped capture or video from being read and sent). */
export const MAX_DROP_BYTES = 16 * 1024 * 1024;

/** Why a dropped file is not sent to project.openContent, as a string key and its
 *  values, or null when it may be. */
export function dropProblem(
  file: { name: string; size: number } | null | undefined,
  max = MAX_DROP_BYTES,
): { key: Key; vars: Record<string, string | number> } | null {
  if (!file) return { key: "project.msg.dropNothing", vars: {} };
  if (file.size === 0) return { key: "project.msg.dropEmpty", vars: { name: file.name } };
  if (file.size > max) return { key: "project.msg.dropTooBig", vars: { name: file.name, mb: Math.round(max / (1024 * 1024)) } };
  return null;
}

