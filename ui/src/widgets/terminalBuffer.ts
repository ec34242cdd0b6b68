/** The console widget's two things that grow while it is open, each with a named cap: the
 *  text shown (a tab left open on a chatty device would otherwise hold every byte it ever
 *  received) and the lines the person sent (ArrowUp recalls them; a send loop or a long
 *  session would otherwise keep every one). Pure, so tests can push past both caps. */

/** Characters of output kept on screen; the oldest go first. */
export const MAX_CHARS = 400_000;
/** Sent lines kept for ArrowUp; the oldest go first. */
export const MAX_HISTORY = 200;

/** The part of a DOM Text node the trimming needs. */
export interface TextLike {
  readonly length: number;
  deleteData(offset: number, count: number): void;
}

/** Drops the start of `text` so at most `max` characters stay (the newest). */
export function trimOutput(text: TextLike, max = MAX_CHARS): void {
  if (text.length > max) text.deleteData(0, text.length - max);
}

/** Remembers a sent line for ArrowUp: not an empty one, nor the same line twice in a row;
 *  at most `max` kept (the newest). */
export function rememberSent(history: string[], line: string, max = MAX_HISTORY): void {
  if (line && history[history.length - 1] !== line) history.push(line);
  if (history.length > max) history.splice(0, history.length - max);
}
