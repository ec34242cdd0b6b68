// The assistant's Markdown: nothing in the model's text may become markup by itself, and
// every prefix of a reply (as it streams) must render sensibly.
import { describe, expect, it } from "vitest";
import { escapeHtml, renderMarkdown as md } from "../src/chat/markdown";

/** Every tag the renderer may write. */
const ALLOWED = new Set(["p", "br", "h3", "h4", "h5", "h6", "strong", "em", "del", "code", "pre", "ul", "ol", "li", "blockquote", "hr", "table", "thead", "tbody", "tr", "th", "td", "a"]);
const tags = (html: string) => [...html.matchAll(/<\/?([a-zA-Z][\w-]*)/g)].map((m) => m[1].toLowerCase());

describe("escaping", () => {
  it("escapes raw HTML everywhere", () => {
    const cases = [
      "<script>alert(1)</script>",
      "**<img src=x onerror=alert(1)>**",
      "- <iframe src=//evil>",
      "# <b>hi</b>",
      "> <svg onload=alert(1)>",
      "| <a> | b |\n|---|---|\n| <script> | x |",
      "`<code>` and <style>body{}</style>",
      "```\n</code></pre><script>x</script>\n```",
    ];
    for (const c of cases) {
      const html = md(c);
      expect(tags(html).filter((t) => !ALLOWED.has(t)), c).toEqual([]);
      expect(html).not.toMatch(/<(script|img|iframe|svg|style|b)\b/i);
    }
    expect(md("<script>alert(1)</script>")).toBe("<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>");
    expect(escapeHtml(`<a href="x" onclick='y'>&`)).toBe("&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;");
  });

  it("links only to http(s), opened safely, and never breaks out of the attribute", () => {
    expect(md("[docs](https://example.com/a?b=1&c=2)")).toBe(
      '<p><a href="https://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">docs</a></p>',
    );
    for (const bad of ["javascript:alert(1)", "data:text/html,<script>x</script>", "file:///etc/passwd", "/relative", "vbscript:x"]) {
      const html = md(`[click](${bad})`);
      expect(html, bad).not.toContain("<a");
      expect(html).toContain("click");
    }
    const quoted = md('[x](https://a.example/"onmouseover="alert(1))');
    expect(quoted).toContain('href="https://a.example/&quot;onmouseover=&quot;alert(1)"');
    expect(quoted).not.toMatch(/"\s*onmouseover=/);
    // Link text is markdown but cannot hold another link.
    expect(md("[**a** [b](https://b.example)](https://a.example)")).toBe(
      '<p><a href="https://a.example" target="_blank" rel="noopener noreferrer"><strong>a</strong> [b](https://b.example)</a></p>',
    );
  });

  it("HTML the model writes is text, however it is spelled", () => {
    expect(md('<a href="javascript:alert(1)">x</a>')).toBe("<p>&lt;a href=&quot;javascript:alert(1)&quot;&gt;x&lt;/a&gt;</p>");
    // Entities are characters, and characters are escaped.
    expect(md("&lt;b&gt; &#x3C;script&#x3E; &amp;")).toBe("<p>&lt;b&gt; &lt;script&gt; &amp;</p>");
    expect(md("<div>\n<img src=x onerror=alert(1)>\n</div>")).toBe("<p>&lt;div&gt;<br>&lt;img src=x onerror=alert(1)&gt;<br>&lt;/div&gt;</p>");
  });

  it("a link to another scheme is its text, however the scheme is written", () => {
    for (const bad of ["java&#115;cript:alert(1)", "JAVASCRIPT:alert(1)", "<javascript:alert(1)>", " vbscript:x", "mailto:a@b.example", "ftp://a.example"]) {
      expect(md(`[x](${bad})`), bad).toBe("<p>x</p>");
    }
    // The scheme is checked on the URL as it reads once entities are undone.
    expect(md("[w](https&#58;//a.example)")).toBe('<p><a href="https://a.example" target="_blank" rel="noopener noreferrer">w</a></p>');
    // Autolinks of other kinds read as written.
    expect(md("<javascript:alert(1)> <mailto:a@b.example> <a@b.example>")).toBe(
      "<p>&lt;javascript:alert(1)&gt; &lt;mailto:a@b.example&gt; &lt;a@b.example&gt;</p>",
    );
    // Only http(s) URLs are linked bare (no `www.` or e-mail guessing).
    expect(md("www.example.com a@b.example ftp://a.example")).toBe("<p>www.example.com a@b.example ftp://a.example</p>");
  });

  it("autolinks bare and <angle> URLs without trailing punctuation; images are not loaded", () => {
    expect(md("See https://example.com/x_(y). Done")).toBe(
      '<p>See <a href="https://example.com/x_(y)" target="_blank" rel="noopener noreferrer">https://example.com/x_(y)</a>. Done</p>',
    );
    expect(md("(at https://example.com)")).toContain('href="https://example.com"');
    expect(md("<https://example.com/a>")).toBe('<p><a href="https://example.com/a" target="_blank" rel="noopener noreferrer">https://example.com/a</a></p>');
    expect(md("![x](https://tracker.example/p.png)")).not.toContain("<img");
    expect(md("xhttps://a.example")).not.toContain("<a");
  });

  it("shows an image as a link reading as its alt text, with no stray '!'", () => {
    expect(md("Here: ![RPM chart](https://img.example/rpm.png \"title\")")).toBe(
      '<p>Here: <a class="md-image" href="https://img.example/rpm.png" target="_blank" rel="noopener noreferrer">RPM chart</a></p>',
    );
    // No alt text: the URL is the link's text, so the link is never empty.
    expect(md("![](https://img.example/p.png)")).toBe(
      '<p><a class="md-image" href="https://img.example/p.png" target="_blank" rel="noopener noreferrer">https://img.example/p.png</a></p>',
    );
    // Alt text is plain: no markup from it, escaped.
    expect(md("![**<b>x</b>**](https://img.example/p.png)")).toContain(">**&lt;b&gt;x&lt;/b&gt;**</a>");
    // Other schemes are never linked: the alt text alone.
    expect(md("![pixel](javascript:alert(1))")).toBe("<p>pixel</p>");
    expect(md("![dot](data:image/png;base64,iVBORw0KGgo=)")).toBe("<p>dot</p>");
    // A badge (an image inside a link) is one link, to the outer target.
    expect(md("[![build](https://ci.example/badge.svg)](https://ci.example/run)")).toBe(
      '<p><a href="https://ci.example/run" target="_blank" rel="noopener noreferrer">build</a></p>',
    );
    // An exclamation mark that starts no image stays.
    expect(md("Done! [docs](https://d.example) and !important")).toBe(
      '<p>Done! <a href="https://d.example" target="_blank" rel="noopener noreferrer">docs</a> and !important</p>',
    );
    expect(md("\\![x](https://a.example)")).toBe('<p>!<a href="https://a.example" target="_blank" rel="noopener noreferrer">x</a></p>');
    // Streaming: half an image is plain text until its URL is complete.
    expect(md("![chart](https://img.exa")).toBe("<p>![chart](https://img.exa</p>");
  });
});

describe("inline", () => {
  it("bold, italic, strikethrough and code", () => {
    expect(md("**bold** *it* _it_ ***both*** ~~gone~~ `x < y`")).toBe(
      "<p><strong>bold</strong> <em>it</em> <em>it</em> <strong><em>both</em></strong> <del>gone</del> <code>x &lt; y</code></p>",
    );
    expect(md("*a **b** c*")).toBe("<p><em>a <strong>b</strong> c</em></p>");
    expect(md("**a *b***")).toBe("<p><strong>a <em>b</em></strong></p>");
  });

  it("leaves snake_case, arithmetic and escaped markers alone", () => {
    expect(md("set dataset_id_2 and max_value")).toBe("<p>set dataset_id_2 and max_value</p>");
    expect(md("2 * 3 * 4")).toBe("<p>2 * 3 * 4</p>");
    expect(md("\\*not\\* \\`x\\`")).toBe("<p>*not* `x`</p>");
  });

  it("code spans are literal", () => {
    expect(md("`**not bold**` and ``a ` b``")).toBe("<p><code>**not bold**</code> and <code>a ` b</code></p>");
    expect(md("**bold `with ** inside`**")).toBe("<p><strong>bold <code>with ** inside</code></strong></p>");
  });

  it("keeps line breaks inside a paragraph", () => {
    expect(md("one\ntwo\n\nthree")).toBe("<p>one<br>two</p><p>three</p>");
  });
});

describe("blocks", () => {
  it("headings are chat-sized", () => {
    expect(md("# Title\n## Sub ##\n###### deep\n#hashtag")).toBe("<h3>Title</h3><h4>Sub</h4><h6>deep</h6><p>#hashtag</p>");
  });

  it("bullet and numbered lists, nested, tight and loose", () => {
    expect(md("- one\n- **two**\n* three")).toBe("<ul><li>one</li><li><strong>two</strong></li><li>three</li></ul>");
    expect(md("3. c\n4. d")).toBe('<ol start="3"><li>c</li><li>d</li></ol>');
    expect(md("1. first\n   - nested a\n   - nested b\n2. second")).toBe(
      "<ol><li>first<ul><li>nested a</li><li>nested b</li></ul></li><li>second</li></ol>",
    );
    expect(md("- a\n\n- b")).toBe("<ul><li><p>a</p></li><li><p>b</p></li></ul>");
    expect(md("Steps:\n1. connect\n2. plot\n\nDone.")).toBe("<p>Steps:</p><ol><li>connect</li><li>plot</li></ol><p>Done.</p>");
    expect(md("- item\n  continued\nlazy")).toBe("<ul><li>item<br>continued<br>lazy</li></ul>");
  });

  it("a list goes on where its bullet or number style changes", () => {
    expect(md("1. a\n2) b")).toBe("<ol><li>a</li><li>b</li></ol>");
    expect(md("- a\n+ b\n* c")).toBe("<ul><li>a</li><li>b</li><li>c</li></ul>");
    expect(md("- a\n\n* b")).toBe("<ul><li><p>a</p></li><li><p>b</p></li></ul>");
    // Not across kinds.
    expect(md("- a\n1. b")).toBe("<ul><li>a</li></ul><ol><li>b</li></ol>");
  });

  it("no setext headings, indented code or link definitions", () => {
    expect(md("Title\n===")).toBe("<p>Title<br>===</p>");
    expect(md("    four spaces")).toBe("<p>four spaces</p>");
    expect(md("[x]: https://a.example\n\n[x]")).toBe(
      '<p>[x]: <a href="https://a.example" target="_blank" rel="noopener noreferrer">https://a.example</a></p><p>[x]</p>',
    );
  });

  it("a list item can hold a code block", () => {
    expect(md("- run:\n  ```sh\n  sextant demo\n  ```\n- then")).toBe(
      '<ul><li>run:<pre class="md-code"><code data-lang="sh">sextant demo</code></pre></li><li>then</li></ul>',
    );
  });

  it("fenced code blocks keep their text verbatim", () => {
    expect(md("```rust\nfn main() { println!(\"<hi>\"); }\n\n**x**\n```\nafter")).toBe(
      '<pre class="md-code"><code data-lang="rust">fn main() { println!(&quot;&lt;hi&gt;&quot;); }\n\n**x**</code></pre><p>after</p>',
    );
    expect(md("~~~\na\n~~~")).toBe('<pre class="md-code"><code>a</code></pre>');
    expect(md('```"><script>\nx\n```')).toBe('<pre class="md-code"><code data-lang="&quot;&gt;&lt;script&gt;">x</code></pre>');
  });

  it("quotes, rules and tables", () => {
    expect(md("> quoted **text**\n> more")).toBe("<blockquote><p>quoted <strong>text</strong><br>more</p></blockquote>");
    expect(md("a\n\n---\n\nb")).toBe("<p>a</p><hr><p>b</p>");
    expect(md("| Dataset | Value |\n|:--|--:|\n| `temp` | 21.5 |\n| rpm")).toBe(
      '<table><thead><tr><th style="text-align: left">Dataset</th><th style="text-align: right">Value</th></tr></thead>' +
        '<tbody><tr><td style="text-align: left"><code>temp</code></td><td style="text-align: right">21.5</td></tr>' +
        '<tr><td style="text-align: left">rpm</td><td style="text-align: right"></td></tr></tbody></table>',
    );
    expect(md("a | b\n---")).toBe("<p>a | b</p><hr>");
  });
});

describe("streaming", () => {
  it("an unclosed fence is a code block to the end", () => {
    expect(md("Here:\n```js\nconst a = 1;\n")).toBe('<p>Here:</p><pre class="md-code"><code data-lang="js">const a = 1;</code></pre>');
    expect(md("```")).toBe('<pre class="md-code"><code></code></pre>');
    // Markdown-looking lines inside stay literal.
    expect(md("```\n# not a heading\n- not a list")).toBe('<pre class="md-code"><code># not a heading\n- not a list</code></pre>');
  });

  it("half-written inline markup is plain text until it closes", () => {
    expect(md("this is **bo")).toBe("<p>this is **bo</p>");
    expect(md("call `project.da")).toBe("<p>call `project.da</p>");
    expect(md("see [the docs](https://exa")).toBe("<p>see [the docs](https://exa</p>");
    expect(md("see [the do")).toBe("<p>see [the do</p>");
    expect(md("*")).toBe("<ul><li></li></ul>");
  });

  it("a half-written link leaves the links after it alone", () => {
    expect(md("[[a](https://x.y) and [b](https://y.z)")).toBe(
      '<p>[[a](https://x.y) and <a href="https://y.z" target="_blank" rel="noopener noreferrer">b</a></p>',
    );
    expect(md("see [a](https://exa\nthen https://b.example")).toBe(
      '<p>see [a](https://exa<br>then <a href="https://b.example" target="_blank" rel="noopener noreferrer">https://b.example</a></p>',
    );
  });

  it("every prefix of a reply renders with only the allowed tags", () => {
    const reply =
      "# Plan\nI will **add a gauge** for `rpm`:\n\n1. Create the *group*\n2. Add [the widget](https://docs.example/w)\n   - min `0`\n\n```json\n{\"widget\": \"gauge\"}\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n> done <script>";
    for (let n = 0; n <= reply.length; n++) {
      const html = md(reply.slice(0, n));
      expect(tags(html).filter((t) => !ALLOWED.has(t)), reply.slice(0, n)).toEqual([]);
      expect(html).not.toContain("<script");
    }
  });

  it("deep nesting is bounded", () => {
    const deep = Array.from({ length: 200 }, (_, k) => `${" ".repeat(k * 2)}- level ${k}`).join("\n");
    expect(() => md(deep)).not.toThrow();
    expect(() => md(">".repeat(5000) + " x")).not.toThrow();
    // Past the limit, what is inside is a plain paragraph, not dropped.
    const quotes = md(">".repeat(40) + " x");
    expect(quotes).toBe(`${"<blockquote>".repeat(18)}<p>${"&gt;".repeat(22)} x</p>${"</blockquote>".repeat(18)}`);
  });
});

// Inputs that took seconds when every unclosed marker (or `[`) searched the rest of the line
// for its partner (in the hand-written renderer before markdown-it). Their outputs are as
// they always were, except where emphasis now pairs as CommonMark says (a closing marker
// takes the nearest opening one before it, and a single run of `*` opens nothing): checked on
// short versions by hand, and on long ones against the same shape. (The test finishing is
// the speed check.)
describe("pathological input", () => {
  const plain = (s: string) => `<p>${escapeHtml(s.trim())}</p>`;

  it("short versions render as before", () => {
    expect(md("*a *a *a")).toBe("<p>*a *a *a</p>");
    expect(md("x _a x _a")).toBe("<p>x _a x _a</p>");
    expect(md("[[[")).toBe("<p>[[[</p>");
    expect(md("**a *b **a *b")).toBe("<p>**a *b **a *b</p>");
    expect(md("x _ax _ax _a")).toBe("<p>x _ax _ax _a</p>");
    // Next to ones that do close (the nearest opener is the one that closes).
    expect(md("*a *b*")).toBe("<p>*a <em>b</em></p>");
    expect(md("*a **b* c**")).toBe("<p><em>a <em><em>b</em> c</em></em></p>");
    expect(md("~~a ~~b~~")).toBe("<p>~~a <del>b</del></p>");
    expect(md("`a ``b`` ``c")).toBe("<p>`a <code>b</code> ``c</p>");
    expect(md("[[a](https://x.y)")).toBe("<p>[[a](https://x.y)</p>");
    expect(md("[a [b](https://x.y) c")).toBe("<p>[a [b](https://x.y) c</p>");
    expect(md("a[b](https://x.y/\"<>) [c](")).toBe(
      '<p>a<a href="https://x.y/&quot;&lt;&gt;" target="_blank" rel="noopener noreferrer">b</a> [c](</p>',
    );
    // Code spans that close inside other ones, as the search for a closing `~~` sees them
    // (none closes: a backslash is literal inside one; the `~~`s pair up).
    expect(md("*~~-\\```(~~-\\```(~~-\\```(")).toBe("<p>*<del>-```(</del>-```(~~-```(</p>");
  });

  it("long runs of unclosed markers render whole and escaped", () => {
    for (const s of ["*a ".repeat(8000), "x _a".repeat(8000), "**a *b ".repeat(8000), "[".repeat(8000)]) {
      expect(md(s), s.slice(0, 8)).toBe(plain(s));
    }
    // All of them on one line, with what needs escaping (~100 KB).
    const unit = "*a x _a **a *b [<i>&\"' ~~c ";
    expect(md(`\`\` ~~ ${unit}${unit}`)).toBe("<p>`` ~~ *a x _a **a *b [&lt;i&gt;&amp;&quot;&#39; ~~c *a x _a **a *b [&lt;i&gt;&amp;&quot;&#39; ~~c</p>");
    const marked = `\`\` ~~ ${unit.repeat(3800)}`;
    expect(marked.length).toBeGreaterThan(100_000);
    const html = md(marked);
    expect(html).toBe(plain(marked));
    expect(tags(html)).toEqual(["p", "p"]);
    expect(md(`${marked}\n\n**ok** [x](https://x.y) \`c\``)).toBe(
      `${plain(marked)}<p><strong>ok</strong> <a href="https://x.y" target="_blank" rel="noopener noreferrer">x</a> <code>c</code></p>`,
    );
    expect(md("*" + "~~-\\```(".repeat(8000))).toBe(`<p>*${"<del>-```(</del>-```(".repeat(4000)}</p>`);
    expect(md("_x a" + "_".repeat(30000) + "b")).toBe(plain("_x a" + "_".repeat(30000) + "b"));
  });

  it("long runs of what markdown-it scans ahead from", () => {
    for (const s of ["![".repeat(50_000), "[".repeat(100_000), "[](".repeat(30_000), "https:".repeat(20_000), "<https:".repeat(15_000)]) {
      expect(md(s), s.slice(0, 8)).toBe(plain(s));
    }
  });

  it("long lines of other kinds", () => {
    const blanks = " ".repeat(30000);
    expect(md(`# a${blanks}x`)).toBe(`<h3>a${blanks}x</h3>`);
    expect(md(`# a${blanks}#${blanks}`)).toBe("<h3>a</h3>");
    expect(md(`a|b\n${blanks}x`)).toBe("<p>a|b<br>x</p>");
    const closes = ")".repeat(30000);
    expect(md(`http://a${closes}`)).toBe(`<p><a href="http://a" target="_blank" rel="noopener noreferrer">http://a</a>${closes}</p>`);
    const dots = ".".repeat(30000);
    expect(md(`http://a${dots}b`)).toBe(`<p><a href="http://a${dots}b" target="_blank" rel="noopener noreferrer">http://a${dots}b</a></p>`);
    expect(md(`- a\n${"\n".repeat(30000)}- b`)).toBe("<ul><li><p>a</p></li><li><p>b</p></li></ul>");
    // A line separator is no line ending (CommonMark): an empty fence whose info string is
    // U+2028, and a list item.
    expect(md("```" + "`".repeat(30000) + "\u2028")).toBe('<pre class="md-code"><code></code></pre>');
    expect(md(`- ${blanks}a\u2028`)).toBe("<ul><li>a\u2028</li></ul>");
  });

  it("nested emphasis is bounded", () => {
    // One run of markers opens nothing (this overflowed the stack).
    expect(md(`a${"*".repeat(12)}a`)).toBe(`<p>a${"*".repeat(12)}a</p>`);
    expect(md(`a${"*".repeat(96)}a`)).toBe(`<p>a${"*".repeat(96)}a</p>`);
    const deep = md(`a${"*".repeat(100_000)}a`);
    expect(deep).toBe(`<p>a${"*".repeat(100_000)}a</p>`);
    // Markers that do nest: 16 levels, then the markers are text.
    const strong = (n: number) => `<p>${"<strong>".repeat(16)}${"**".repeat(n - 16)}x${"**".repeat(n - 16)}${"</strong>".repeat(16)}</p>`;
    expect(md(`${"**".repeat(20)}x${"**".repeat(20)}`)).toBe(strong(20));
    expect(md(`${"**".repeat(50_000)}x${"**".repeat(50_000)}`)).toBe(strong(50_000));
  });
});
