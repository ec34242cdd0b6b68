// The injection corpus (fixtures/injection/payloads.json) as the assistant panel would show
// it, were the model to repeat a payload word for word: nothing becomes markup by itself,
// nothing loads on its own (no image, no frame, no script, no style), and the only links are
// http(s) ones a person has to click, opened away from the app.
import { describe, expect, it } from "vitest";
import corpusJson from "../../fixtures/injection/payloads.json?raw";
import { renderMarkdown } from "../src/chat/markdown";

interface Payload {
  id: string;
  lang: string;
  technique: string;
  text: string;
}

const corpus: { payloads: Payload[] } = JSON.parse(corpusJson);

const ALLOWED = new Set(["p", "br", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "ul", "ol", "li", "blockquote", "hr", "table", "thead", "tbody", "tr", "th", "td", "a"]);

/** The rendered HTML as a browser would build it: its elements and attributes. */
function parse(html: string) {
  const elements = [...html.matchAll(/<([a-zA-Z][\w-]*)([^>]*)>/g)].map((m) => ({
    tag: m[1].toLowerCase(),
    attrs: [...m[2].matchAll(/([\w-]+)="([^"]*)"/g)].map((a) => [a[1].toLowerCase(), a[2]] as const),
  }));
  return elements;
}

describe("the injection corpus in the assistant panel", () => {
  it("has payloads that try markup at all", () => {
    const markup = corpus.payloads.filter((p) => /markdown|html/.test(p.technique));
    expect(markup.length).toBeGreaterThanOrEqual(8);
  });

  for (const p of corpus.payloads) {
    it(`${p.id} (${p.technique}) renders as text and inert links`, () => {
      // Alone, inside a reply, and as the tail of one that is still streaming.
      for (const text of [p.text, `The device said:\n\n${p.text}\n\nShall I?`, `> ${p.text}`]) {
        const html = renderMarkdown(text);
        for (const { tag, attrs } of parse(html)) {
          expect(ALLOWED.has(tag), `<${tag}> in ${html}`).toBe(true);
          for (const [name, value] of attrs) {
            expect(name.startsWith("on"), `${name} in ${html}`).toBe(false);
            expect(["href", "target", "rel", "class", "title"].includes(name), `${name} in ${html}`).toBe(true);
            if (name === "href") expect(value, html).toMatch(/^https?:\/\//i);
          }
          if (tag === "a") {
            const get = (n: string) => attrs.find(([k]) => k === n)?.[1];
            expect(get("target")).toBe("_blank");
            expect(get("rel")).toBe("noopener noreferrer");
          }
        }
        expect(html).not.toMatch(/<(img|iframe|script|style|svg|object|embed|link|meta)\b/i);
      }
    });
  }
});
