/** Clock widget value → time of day. Values above 1e12 are Unix milliseconds, above 1e9 Unix
 *  seconds (shown in local time); anything else is seconds since midnight (wraps at 24 h). */
export function clockParts(value: number, tzOffsetMin = new Date().getTimezoneOffset()): { h: number; m: number; s: number } | null {
  if (!Number.isFinite(value)) return null;
  let secs: number;
  if (Math.abs(value) >= 1e12) secs = value / 1000 - tzOffsetMin * 60;
  else if (Math.abs(value) >= 1e9) secs = value - tzOffsetMin * 60;
  else secs = value;
  secs = ((secs % 86400) + 86400) % 86400;
  const h = Math.floor(secs / 3600);
  const m = Math.floor((secs % 3600) / 60);
  const s = Math.floor(secs % 60);
  return { h, m, s };
}

export function clockText(value: number, tzOffsetMin?: number): string {
  const p = clockParts(value, tzOffsetMin);
  if (!p) return "--:--:--";
  const two = (n: number) => (n < 10 ? "0" : "") + n;
  return `${two(p.h)}:${two(p.m)}:${two(p.s)}`;
}
