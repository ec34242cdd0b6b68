import { describe, expect, it } from "vitest";
import { ConsoleFormatter, SENT, formatConsole, isSent, hexByte, lineEndingBytes, parseHex, sendPreview, stamp, wireLineEnding } from "../src/widgets/math/console";

const b = (s: string) => new TextEncoder().encode(s);

describe("console formatting", () => {
  it("ASCII: CRLF, lone CR and LF each end one line; control bytes become pictures", () => {
    expect(formatConsole([{ t: 0, bytes: b("a\r\nb\rc\nd") }], { hex: false, timestamps: false })).toBe("a\nb\nc\nd");
    expect(formatConsole([{ t: 0, bytes: Uint8Array.of(0x41, 0x00, 0x1b, 0x09, 0x7f) }], { hex: false, timestamps: false })).toBe("A\u2400\u241b\t\u2421");
  });

  it("a CRLF split across chunks is still one line break", () => {
    const f = new ConsoleFormatter({ hex: false, timestamps: false });
    expect(f.push(b("x\r"), 0) + f.push(b("\ny"), 0)).toBe("x\ny");
  });

  it("UTF-8 split across chunks is decoded whole", () => {
    const bytes = b("温度");
    const f = new ConsoleFormatter({ hex: false, timestamps: false });
    expect(f.push(bytes.subarray(0, 2), 0) + f.push(bytes.subarray(2), 0)).toBe("温度");
  });

  it("timestamps start each line with the time of the chunk that began it", () => {
    const out = formatConsole([{ t: 1.5, bytes: b("ab\nc") }, { t: 2, bytes: b("d\ne") }], { hex: false, timestamps: true });
    expect(out).toBe("[1.500] ab\n[1.500] cd\n[2.000] e");
  });

  it("hex: upper case pairs, wrapped at bytesPerLine, across chunks", () => {
    const out = formatConsole([{ t: 0, bytes: Uint8Array.of(0, 15, 255) }, { t: 1, bytes: Uint8Array.of(16, 171) }], { hex: true, timestamps: false, bytesPerLine: 4 });
    expect(out).toBe("00 0F FF 10\nAB");
    const ts = formatConsole([{ t: 3, bytes: Uint8Array.of(1, 2, 3) }], { hex: true, timestamps: true, bytesPerLine: 2 });
    expect(ts).toBe("[3.000] 01 02\n[3.000] 03");
  });

  it("helpers", () => {
    expect(hexByte(10)).toBe("0A");
    expect(stamp(NaN)).toBe("[—] ");
  });
});

describe("send box", () => {
  it("maps UI line endings to the command's spelling and bytes", () => {
    expect(wireLineEnding("crlf")).toBe("crLf");
    expect(wireLineEnding("lf")).toBe("lf");
    expect(lineEndingBytes("crlf")).toEqual([13, 10]);
    expect(lineEndingBytes("none")).toEqual([]);
  });

  it("parses hex in common spellings and rejects odd or foreign input", () => {
    expect(Array.from(parseHex("48 65 6c")!)).toEqual([0x48, 0x65, 0x6c]);
    expect(Array.from(parseHex("0x48,0x65")!)).toEqual([0x48, 0x65]);
    expect(Array.from(parseHex("DEADbeef")!)).toEqual([0xde, 0xad, 0xbe, 0xef]);
    expect(parseHex("123")).toBeNull();
    expect(parseHex("zz")).toBeNull();
    expect(parseHex("")!.length).toBe(0);
  });

  it("previews the bytes that go on the wire", () => {
    expect(sendPreview("Hi", false, "crlf")).toBe("48 69 0D 0A");
    expect(sendPreview("01 02", true, "cr")).toBe("01 02 0D");
    expect(sendPreview("0g", true, "none")).toBeNull();
    expect(sendPreview("é", false, "none")).toBe("C3 A9");
  });
});

describe("what Sextant sent, among what arrived", () => {
  const sent = new TextEncoder().encode("R\r\n");
  it("puts a send on a line of its own, marked and with its line ending visible", () => {
    const f = new ConsoleFormatter({ hex: false, timestamps: false });
    const out = f.push(new TextEncoder().encode("5.0"), 1) + f.sent(sent, 1.5) + f.push(new TextEncoder().encode("\n4.9\n"), 2);
    expect(out).toBe("5.0\n→ R␍␊\n\n4.9\n");
  });
  it("shows a send as hex bytes in hex mode, with its timestamp", () => {
    const f = new ConsoleFormatter({ hex: true, timestamps: true });
    expect(f.sent(new Uint8Array([0x52, 0x0a]), 2.25)).toBe("[2.250] → 52 0A\n");
  });
  it.each([
    [0, false],
    [3, false],
    [SENT | 0, true],
    [SENT | 2, true],
  ])("source %i is a send: %s", (source, expected) => {
    expect(isSent(source)).toBe(expected);
  });
});
