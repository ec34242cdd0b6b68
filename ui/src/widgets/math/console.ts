/** Console text: bytes → ASCII or hex view lines with optional timestamps, and what the send
 *  box will put on the wire. Pure; the Terminal widget renders incrementally with it. */

export type LineEnding = "none" | "lf" | "cr" | "crlf";
export const LINE_ENDINGS: LineEnding[] = ["none", "lf", "cr", "crlf"];

/** The command's spelling of a line ending (console.send takes "crLf"). */
export function wireLineEnding(e: LineEnding): "none" | "lf" | "cr" | "crLf" {
  return e === "crlf" ? "crLf" : e;
}

export function lineEndingBytes(e: LineEnding): number[] {
  return e === "lf" ? [10] : e === "cr" ? [13] : e === "crlf" ? [13, 10] : [];
}

/** Parses "48 65 6c", "48656C", "0x48,0x65": null when not whole bytes of hex. */
export function parseHex(s: string): Uint8Array | null {
  const clean = s.replace(/0x/gi, "").replace(/[\s,;:-]+/g, "");
  if (clean.length % 2 !== 0 || /[^0-9a-f]/i.test(clean)) return null;
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function hexByte(b: number): string {
  return (b < 16 ? "0" : "") + b.toString(16).toUpperCase();
}

/** Bytes the send box will transmit before any checksum, as hex; null for bad hex input. */
export function sendPreview(data: string, hex: boolean, ending: LineEnding): string | null {
  const body = hex ? parseHex(data) : new TextEncoder().encode(data);
  if (!body) return null;
  return [...body, ...lineEndingBytes(ending)].map(hexByte).join(" ");
}

/** Session seconds as "[12.345] ". */
export function stamp(t: number): string {
  return Number.isFinite(t) ? `[${t.toFixed(3)}] ` : "[—] ";
}

/** A control character's visible stand-in (Unicode control pictures). */
function picture(code: number): string {
  return code === 0x7f ? "\u2421" : String.fromCharCode(0x2400 + code);
}

/** The bit of a console record's source that marks bytes sent to the device (a console
 *  send, an action, an action's timer) rather than received: `sextant_display::SENT`. */
export const SENT = 0x8000_0000;

/** Whether a console chunk's source marks it as sent to the device. */
export const isSent = (source: number) => (source & SENT) !== 0;

/** Incremental formatter: feed chunks in order, get text to append. Keeps the line state
 *  (column, whether a timestamp is due, a CR waiting for its LF) across chunks. */
export class ConsoleFormatter {
  private atLineStart = true;
  private pendingCr = false;
  private col = 0;
  private decoder = new TextDecoder("utf-8", { fatal: false });

  constructor(readonly opts: { hex: boolean; timestamps: boolean; bytesPerLine?: number }) {}

  push(bytes: Uint8Array, t: number): string {
    return this.opts.hex ? this.hex(bytes, t) : this.ascii(bytes, t);
  }

  /** Bytes sent to the device: a line of their own marked "→ ", every byte visible (hex,
   *  or text with its control characters as pictures), so a send never runs into a
   *  received line and its line ending is seen, not obeyed. */
  sent(bytes: Uint8Array, t: number): string {
    let out = this.atLineStart ? "" : "\n";
    if (this.opts.timestamps) out += stamp(t);
    out += "→ ";
    if (this.opts.hex) out += [...bytes].map(hexByte).join(" ");
    else {
      const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
      for (const ch of text) {
        const code = ch.codePointAt(0) ?? 0;
        out += (code < 0x20 && ch !== "\t") || code === 0x7f ? picture(code) : ch;
      }
    }
    this.atLineStart = true;
    this.pendingCr = false;
    this.col = 0;
    return out + "\n";
  }

  private hex(bytes: Uint8Array, t: number): string {
    const per = this.opts.bytesPerLine ?? 16;
    let out = "";
    for (let i = 0; i < bytes.length; i++) {
      if (this.col === per) {
        out += "\n";
        this.col = 0;
        this.atLineStart = true;
      }
      if (this.atLineStart) {
        if (this.opts.timestamps) out += stamp(t);
        this.atLineStart = false;
      } else out += " ";
      out += hexByte(bytes[i]);
      this.col++;
    }
    return out;
  }

  private ascii(bytes: Uint8Array, t: number): string {
    const text = this.decoder.decode(bytes, { stream: true });
    let out = "";
    for (let i = 0; i < text.length; i++) {
      const ch = text[i];
      const code = text.charCodeAt(i);
      if (this.pendingCr) {
        this.pendingCr = false;
        if (ch === "\n") continue; // CRLF is one line break.
      }
      if (ch === "\n" || ch === "\r") {
        out += "\n";
        this.atLineStart = true;
        this.pendingCr = ch === "\r";
        continue;
      }
      if (this.atLineStart) {
        if (this.opts.timestamps) out += stamp(t);
        this.atLineStart = false;
      }
      out += code < 0x20 && ch !== "\t" ? picture(code) : code === 0x7f ? picture(code) : ch;
    }
    return out;
  }
}

/** Whole-buffer convenience (tests, exports). */
export function formatConsole(chunks: { t: number; bytes: Uint8Array }[], opts: { hex: boolean; timestamps: boolean; bytesPerLine?: number }): string {
  const f = new ConsoleFormatter(opts);
  let s = "";
  for (const c of chunks) s += f.push(c.bytes, c.t);
  return s;
}
