/** Output controls' arithmetic and send pacing, pure so they are tested without a page.
 *  `Controls.svelte` draws the controls; what a value becomes on the wire is the control's
 *  own `transmit(value)` script, run by the backend. */

export interface Range {
  min: number;
  max: number;
  step: number;
}

/** `v` on the control's grid: within [min, max], on a whole number of steps from min, and
 *  without the float noise of the step arithmetic (0.1 + 0.2). */
export function snap(v: number, r: Range): number {
  if (!Number.isFinite(v)) return r.min;
  const clamped = Math.min(r.max, Math.max(r.min, v));
  if (!(r.step > 0)) return clamped;
  const n = Math.round((clamped - r.min) / r.step);
  const decimals = Math.max(decimalsOf(r.step), decimalsOf(r.min));
  return Math.min(r.max, +(r.min + n * r.step).toFixed(Math.min(12, decimals)));
}

function decimalsOf(x: number): number {
  const s = String(x);
  const e = s.match(/e-(\d+)$/);
  if (e) return Number(e[1]);
  const dot = s.indexOf(".");
  return dot < 0 ? 0 : s.length - dot - 1;
}

/** A knob's sweep: 270° from lower left (min) to lower right (max); angle in radians,
 *  0 pointing right, growing clockwise on a canvas (y down). */
export const KNOB_START = (3 * Math.PI) / 4;
export const KNOB_SWEEP = (3 * Math.PI) / 2;

export function knobAngle(v: number, r: Range): number {
  const f = r.max > r.min ? (Math.min(r.max, Math.max(r.min, v)) - r.min) / (r.max - r.min) : 0;
  return KNOB_START + f * KNOB_SWEEP;
}

/** The value a vertical drag of `dy` pixels (up is negative) gives a knob that stood at
 *  `from`: its whole range over `span` pixels. */
export function knobDrag(from: number, dy: number, r: Range, span = 200): number {
  return snap(from - (dy / span) * (r.max - r.min), r);
}

/** Paces the sends of a control being dragged: one send at a time, no more often than
 *  every `minMs`, and the last value always sent (so the device ends where the control
 *  stopped). A value that arrives while a send is out waits as `pending`; a newer one
 *  replaces it. */
export class SendPacer<T> {
  private busy = false;
  private pending: { v: T } | null = null;
  private last = -Infinity;
  private timer: ReturnType<typeof setTimeout> | null = null;

  constructor(
    private readonly send: (v: T) => Promise<unknown>,
    private readonly minMs = 100,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Asks for `v` to be sent; resolves when it, or a newer value that replaced it, went. */
  push(v: T): void {
    this.pending = { v };
    this.pump();
  }

  /** Whether nothing is out or waiting. */
  get idle(): boolean {
    return !this.busy && !this.pending && !this.timer;
  }

  private pump(): void {
    if (this.busy || !this.pending || this.timer) return;
    const wait = this.last + this.minMs - this.now();
    if (wait > 0) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.pump();
      }, wait);
      return;
    }
    const { v } = this.pending;
    this.pending = null;
    this.busy = true;
    this.last = this.now();
    this.send(v)
      .catch(() => {})
      .finally(() => {
        this.busy = false;
        this.pump();
      });
  }
}
