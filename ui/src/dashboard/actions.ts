/** What an action button says: its payload as a person reads it and what a click does.
 *  Pure, so it is tested without a page. */
import type { Key } from "../lib/i18n/index.svelte";
import type { Action, ActionTimer } from "../lib/wire/types.gen";

/** How many times a `repeat` timer sends per click when the project does not say. */
export const DEFAULT_REPEAT = 3;

/** The payload as shown on a button or in its tooltip: hex bytes as written, text with its
 *  control characters visible ("PING␊"). */
export function payloadText(a: Pick<Action, "payload" | "hex" | "lineEnding">): string {
  if (a.hex) return a.payload.trim();
  const ending = { none: "", lf: "␊", cr: "␍", crLf: "␍␊" }[a.lineEnding ?? "none"] ?? "";
  const shown = a.payload.replace(/[\x00-\x1f\x7f]/g, (c) => String.fromCharCode(c === "\x7f" ? 0x2421 : 0x2400 + c.charCodeAt(0)));
  return `“${shown}${ending}”`;
}

/** The tooltip's string and its values: what a click on `a` does. */
export function actionHint(a: { timerMs?: number | null; timer?: ActionTimer | null; repeatCount?: number | null }, payload: string): [Key, Record<string, string>] {
  if (a.timerMs == null) return ["dash.action.once", { payload }];
  const ms = String(a.timerMs);
  const timer: ActionTimer = a.timer ?? "whileConnected";
  if (timer === "repeat") return ["dash.action.repeat", { payload, ms, count: String(a.repeatCount ?? DEFAULT_REPEAT) }];
  const keys: Record<Exclude<typeof timer, "repeat">, Key> = {
    whileConnected: "dash.action.whileConnected",
    startOnClick: "dash.action.startOnClick",
    toggleOnClick: "dash.action.toggleOnClick",
  };
  return [keys[timer], { payload, ms }];
}
