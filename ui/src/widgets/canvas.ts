/** Canvas plumbing for widgets: sizes the canvas to its box at device resolution and calls
 *  the widget's draw from the live loop (only when data changed, or after a resize). */
import { invalidate, register } from "../lib/display/live.svelte";
import type { LiveStore } from "../lib/display/store";

export type CanvasDraw = (ctx: CanvasRenderingContext2D, w: number, h: number, store: LiveStore) => void;

export function canvasWidget(canvas: HTMLCanvasElement, draw: CanvasDraw): () => void {
  const ctx = canvas.getContext("2d");
  if (!ctx) return () => {};
  let w = 0, h = 0;
  const box = canvas.parentElement ?? canvas;
  const resize = () => {
    const r = box.getBoundingClientRect();
    const dpr = globalThis.devicePixelRatio || 1;
    w = Math.max(1, Math.floor(r.width));
    h = Math.max(1, Math.floor(r.height));
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    canvas.style.width = `${w}px`;
    canvas.style.height = `${h}px`;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    invalidate();
  };
  const ro = new ResizeObserver(resize);
  ro.observe(box);
  resize();
  const off = register((store) => {
    ctx.clearRect(0, 0, w, h);
    draw(ctx, w, h, store);
  });
  return () => {
    ro.disconnect();
    off();
  };
}

/** Centered text helper. */
export function text(ctx: CanvasRenderingContext2D, s: string, x: number, y: number, color: string, size = 12, align: CanvasTextAlign = "center", weight = "") {
  ctx.fillStyle = color;
  ctx.font = `${weight} ${size}px system-ui, sans-serif`;
  ctx.textAlign = align;
  ctx.textBaseline = "middle";
  ctx.fillText(s, x, y);
}
