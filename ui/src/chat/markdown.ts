/** Markdown for the assistant's replies, as HTML that is safe to insert.
 *
 *  The model's text is untrusted (it may quote device data, project strings or a web page),
 *  so nothing in it ever becomes markup by itself. markdown-it parses it (CommonMark, with
 *  tables and strikethrough) with raw HTML off, so every character the model writes is
 *  text, escaped by the renderer; the only tags in the output are the fixed ones markdown-it
 *  writes for paragraphs, line breaks, headings, strong/em/del, inline code, fenced code
 *  blocks, lists, block quotes, rules and tables, and links to http(s) URLs (`target="_blank"
 *  rel="noopener noreferrer"`). A link to any other scheme is its text alone. No images: a
 *  remote image would load the moment the reply renders (a tracking pixel, or data leaked in
 *  its URL), so `![alt](url)` is a link to the URL that reads as its alt text, marked
 *  `md-image`, and just the alt text for any other scheme or inside a link.
 *
 *  Streaming-safe: the text is re-rendered as it grows, so every half-written construct
 *  renders as something sensible – an unclosed fence is a code block to the end, an
 *  unclosed `**` or backtick is plain text until its closing part arrives, and so is the
 *  rest of the line after a `[text](` whose URL has not all arrived (not a link to half a
 *  URL). markdown-it is linear in its input; the rules added here are too. */

import MarkdownIt from "markdown-it";
import type { StateBlock, StateCore, StateInline, Token } from "markdown-it";

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** How deep lists and quotes may nest before what is inside them is shown as a plain
 *  paragraph (a quote is one of markdown-it's levels, a list two: the list and its item). */
const MAX_BLOCK_LEVEL = 18;

/** How deep strong, em and del may nest before their markers are shown as plain text. */
const MAX_EMPHASIS = 16;
const EMPHASIS = /^(strong|em|s)_(open|close)$/;

const HTTP = /^https?:\/\/\S+$/i;
const isWord = (c: string | undefined) => c !== undefined && /[\p{L}\p{N}_]/u.test(c);

const md = new MarkdownIt("default", {
  html: false,
  breaks: true,
  // Bare URLs are linked by the `bare_url` rule below, http(s) only, as they always were here
  // (markdown-it's linkify would also link `www.…` and e-mail addresses).
  linkify: false,
  typographer: false,
  // Bounds how deep the inline scans recurse (an unclosed `![` nested in another costs up
  // to this much each: 100 KB of them took 0.6 s at markdown-it's default of 100), and how
  // deep blocks nest (`too_deep` below takes over first).
  maxNesting: MAX_BLOCK_LEVEL + 2,
});
// Not in the dialect the model is asked to write, and surprising when it slips in: text
// under a `---` is no heading, an indented line is no code block, and `[x]: url` lines do
// not vanish into link definitions.
md.disable(["lheading", "code", "reference"]);

// Which links and images survive is decided once, on the parsed tokens (`inline` below);
// the URL is kept as written (the renderer escapes it in the attribute).
md.validateLink = () => true;
md.normalizeLink = (url) => url;
md.normalizeLinkText = (url) => url;

/** Renders `src` (Markdown) as safe HTML. */
export function renderMarkdown(src: string): string {
  return md.render(src);
}

// ---- parsing -------------------------------------------------------------------------

/** Past `MAX_BLOCK_LEVEL`, the rest of the block is one plain paragraph (markdown-it itself
 *  would drop it at its nesting limit). */
md.block.ruler.before("table", "too_deep", (state: StateBlock, startLine: number, endLine: number, silent: boolean) => {
  if (state.level < MAX_BLOCK_LEVEL) return false;
  if (silent) return true;
  const text = state.getLines(startLine, endLine, state.blkIndent, false).trim();
  state.line = endLine;
  state.push("paragraph_open", "p", 1).map = [startLine, endLine];
  const inline = state.push("inline", "", 0);
  inline.content = text;
  inline.map = [startLine, endLine];
  inline.children = [];
  state.push("paragraph_close", "p", -1);
  return true;
});

/** A bare http(s) URL, found at its `:`, without trailing punctuation or unbalanced closing
 *  parentheses; not right after a letter, digit or `_`, and not inside a link's text. */
const URL_AT = /https?:\/\/[^\s<>"'`]+/iy;
md.inline.ruler.before("linkify", "bare_url", (state: StateInline, silent: boolean) => {
  // In a link label's scan (silent), a URL is not skipped whole: the label's `]` wins.
  if (silent || state.linkLevel > 0 || state.src.charCodeAt(state.pos) !== 0x3a) return false;
  // The scheme is the end of the pending text (read from the source: slicing the pending
  // text, built up a character at a time, would copy all of it at every `:`).
  const scheme = /https?$/i.exec(state.src.slice(Math.max(0, state.pos - 5), state.pos))?.[0];
  if (!scheme || state.pending.length < scheme.length) return false;
  const start = state.pos - scheme.length;
  if (isWord(state.src[start - 1])) return false;
  URL_AT.lastIndex = start;
  const found = URL_AT.exec(state.src);
  if (!found) return false;
  const url = trimUrl(found[0].slice(0, state.posMax - start));
  if (!url) return false;
  state.pending = state.pending.slice(0, -scheme.length);
  const open = state.push("link_open", "a", 1);
  open.attrs = [["href", url]];
  open.markup = "linkify";
  open.info = "auto";
  state.push("text", "", 0).content = url;
  const close = state.push("link_close", "a", -1);
  close.markup = "linkify";
  close.info = "auto";
  state.pos = start + url.length;
  return true;
});

/** `url` without trailing punctuation, then without closing parentheses that no opening one
 *  balances (counted once, not once per parenthesis removed); null if no host is left. */
function trimUrl(url: string): string | null {
  let end = url.length;
  while (end > 0 && ".,;:!?*_~".includes(url[end - 1])) end--;
  url = url.slice(0, end);
  const opens = url.split("(").length - 1;
  let closes = url.split(")").length - 1;
  while (url.endsWith(")") && opens < closes) {
    url = url.slice(0, -1);
    closes--;
  }
  return /^https?:\/\/./i.test(url) ? url : null;
}

/** A link's text may hold another link's source, which is then its text (`[a [b](u)](v)`
 *  is one link, to v): the label's scan does not stop at a link inside it, and inside a
 *  link's text a `[` is just text. */
const parseLinkLabel = md.helpers.parseLinkLabel;
md.helpers = { ...md.helpers, parseLinkLabel: (state, start) => parseLinkLabel(state, start, false) };
md.inline.ruler.before("link", "link_in_link", (state: StateInline, silent: boolean) => {
  if (state.linkLevel === 0 || state.src.charCodeAt(state.pos) !== 0x5b) return false;
  if (!silent) state.pending += "[";
  state.pos++;
  return true;
});

/** Per inline state and character: the last search for it, from where, and where it was
 *  found (-1: nowhere after). */
const searches = new WeakMap<StateInline, Map<string, { from: number; at: number }>>();

/** The first `c` at or after `from` in the state's source, or -1. A search that found
 *  nothing, or found a place still ahead, is not repeated (`from` only grows). */
function nextOf(state: StateInline, c: string, from: number): number {
  let known = searches.get(state);
  if (!known) searches.set(state, (known = new Map()));
  const last = known.get(c);
  if (last && from >= last.from && (last.at < 0 || last.at >= from)) return last.at;
  const at = state.src.indexOf(c, from);
  known.set(c, { from, at });
  return at;
}

/** A `[` that starts no link, where the first `]` after it is followed by `(`: a link whose
 *  URL is still streaming in (`[text](https://exa`), or one that never closes. It is plain
 *  text up to its first `)`, or to the end of the line while none has arrived, so that
 *  half a URL is not linked as a bare one. (After markdown-it's `link` rule, which takes
 *  every complete link.) */
md.inline.ruler.after("link", "half_link", (state: StateInline, silent: boolean) => {
  if (silent || state.linkLevel > 0 || state.src.charCodeAt(state.pos) !== 0x5b) return false;
  let lineEnd = nextOf(state, "\n", state.pos);
  if (lineEnd < 0 || lineEnd > state.posMax) lineEnd = state.posMax;
  const close = nextOf(state, "]", state.pos + 1);
  if (close < 0 || close >= lineEnd || state.src.charCodeAt(close + 1) !== 0x28) return false;
  const paren = nextOf(state, ")", close + 2);
  const end = paren >= 0 && paren < lineEnd ? paren + 1 : lineEnd;
  state.pending += state.src.slice(state.pos, end);
  state.pos = end;
  return true;
});

/** What the renderer may write, decided on the tokens. */
md.core.ruler.push("sextant", (state: StateCore) => {
  const lines = state.src.split("\n");
  state.tokens = mergeLists(state.tokens, (line) => (lines[line] ?? "").trim() === "");
  for (const token of state.tokens) {
    // One line of HTML: no line breaks between tags (code keeps its own, as text).
    token.block = false;
    if (token.type === "heading_open" || token.type === "heading_close") {
      // Chat-sized: `#` is an h3, and so on down to h6.
      token.tag = `h${Math.min(6, Number(token.tag.slice(1)) + 2)}`;
    } else if (token.type === "th_open" || token.type === "td_open") {
      const align = /text-align:\s*(\w+)/.exec(String(token.attrGet("style") ?? ""))?.[1];
      token.attrs = align ? [["style", `text-align: ${align}`]] : null;
    } else if (token.type === "inline" && token.children) {
      token.children = inline(token.children, state.Token);
    } else if (token.type === "fence" && token.map) {
      // Closed when its last line is a closing fence (an open one runs to the end of the
      // text, or of the list item or quote it is in).
      const [first, next] = token.map;
      const closing = new RegExp(`${token.markup[0]}{${token.markup.length},}[ \\t]*$`);
      token.meta = { closed: next - 1 > first && closing.test(lines[next - 1] ?? "") };
    }
  }
  return true;
});

/** An inline token list with only safe links, images as links or text, strikethrough as
 *  `<del>`, and `***x***` as `<strong><em>`. */
function inline(tokens: Token[], TokenOf: typeof Token): Token[] {
  const out: Token[] = [];
  // Per open link: whether it was kept (a link to another scheme is its text alone).
  const links: boolean[] = [];
  // Per open emphasis: whether it was kept.
  const emphasis: boolean[] = [];
  const text = (content: string) => {
    const t = new TokenOf("text", "", 0);
    t.content = content;
    return t;
  };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    // Emphasis leaves empty text behind.
    if (t.type === "text" && !t.content) continue;
    if (t.type === "link_open") {
      const href = String(t.attrGet("href") ?? "");
      const keep = HTTP.test(href) && links.length === 0;
      links.push(keep);
      if (keep) {
        t.attrs = [["href", href], ["target", "_blank"], ["rel", "noopener noreferrer"]];
        out.push(t);
      } else if (t.markup === "autolink") {
        // `<mailto:x>` and the like read as written.
        const inner = tokens[i + 1]?.type === "text" ? tokens[i + 1].content : "";
        out.push(text(`<${inner}>`));
        i += inner ? 2 : 1;
        links.pop();
      }
      continue;
    }
    if (t.type === "link_close") {
      if (links.pop()) out.push(t);
      continue;
    }
    if (t.type === "image") {
      // Alt text is text: no markup of its own (its raw source, backslash escapes undone).
      const alt = t.content.replace(/\\([!-/:-@[-`{-~])/g, "$1");
      const src = String(t.attrGet("src") ?? "");
      // Inside a link (`[![badge](img)](href)`) the outer link is the one to follow.
      if (links.length || !HTTP.test(src)) {
        out.push(text(alt));
      } else {
        const open = new TokenOf("link_open", "a", 1);
        open.attrs = [["class", "md-image"], ["href", src], ["target", "_blank"], ["rel", "noopener noreferrer"]];
        out.push(open, text(alt || src), new TokenOf("link_close", "a", -1));
      }
      continue;
    }
    if (t.type === "s_open" || t.type === "s_close") t.tag = "del";
    if (EMPHASIS.test(t.type)) {
      // Nested too deep (only ever on purpose): the markers are plain text.
      if (t.nesting === 1) emphasis.push(emphasis.length < MAX_EMPHASIS);
      if (!(t.nesting === 1 ? emphasis[emphasis.length - 1] : emphasis.pop())) {
        out.push(text(t.markup));
        continue;
      }
    }
    out.push(t);
  }
  strongOutside(out);
  return out;
}

/** `***x***` parses as `<em><strong>x</strong></em>`; written here as `<strong><em>`, as
 *  the same text always was. */
function strongOutside(tokens: Token[]) {
  for (let i = 0; i + 1 < tokens.length; i++) {
    if (tokens[i].type !== "em_open" || tokens[i + 1].type !== "strong_open") continue;
    const level = tokens[i].level;
    let j = i + 2;
    while (j < tokens.length && !(tokens[j].type === "em_close" && tokens[j].level === level)) j++;
    if (j >= tokens.length || tokens[j - 1].type !== "strong_close" || tokens[j - 1].level !== level + 1) continue;
    for (const [a, b] of [
      [i, i + 1],
      [j - 1, j],
    ]) {
      const [x, y] = [tokens[a], tokens[b]];
      [x.type, x.tag, x.markup, y.type, y.tag, y.markup] = [y.type, y.tag, y.markup, x.type, x.tag, x.markup];
    }
  }
}

/** Adjacent lists of the same kind are one list: CommonMark starts a new list where the
 *  bullet changes (`-` then `*`) or the number's `.` becomes `)`, which the model does not
 *  mean. The merged list is loose if either was, or a blank line separated them. */
function mergeLists(tokens: Token[], blankLine: (line: number) => boolean): Token[] {
  type List = { level: number; loose: boolean; paragraphs: Token[] };
  const lists: List[] = [];
  const merged: List[] = [];
  let closed: List | undefined;
  const out: Token[] = [];
  for (const t of tokens) {
    if (t.type === "bullet_list_open" || t.type === "ordered_list_open") {
      const prev = out[out.length - 1];
      if (closed && prev?.type === t.type.replace(/_open$/, "_close") && prev.level === t.level) {
        // The one before goes on: neither its end nor this start is written.
        out.pop();
        if (t.map && blankLine(t.map[0] - 1)) closed.loose = true;
        merged.push(closed);
        lists.push(closed);
        closed = undefined;
        continue;
      }
      lists.push({ level: t.level, loose: false, paragraphs: [] });
    } else if (t.type === "bullet_list_close" || t.type === "ordered_list_close") {
      closed = lists.pop();
      out.push(t);
      continue;
    } else if ((t.type === "paragraph_open" || t.type === "paragraph_close") && lists.length) {
      // An item's own paragraphs, hidden in a tight list.
      const list = lists[lists.length - 1];
      if (t.level === list.level + 2) {
        list.paragraphs.push(t);
        if (!t.hidden) list.loose = true;
      }
    }
    closed = undefined;
    out.push(t);
  }
  for (const list of merged) if (list.loose) for (const t of list.paragraphs) t.hidden = false;
  return out;
}

// ---- rendering -----------------------------------------------------------------------

const rules = md.renderer.rules;
rules.text = (tokens, idx) => escapeHtml(tokens[idx].content);
rules.code_inline = (tokens, idx) => `<code>${escapeHtml(tokens[idx].content)}</code>`;
rules.softbreak = () => "<br>";
// Never made with `html: false`; text all the same should that ever change.
rules.html_block = rules.html_inline = (tokens, idx) => escapeHtml(tokens[idx].content);
rules.hardbreak = () => "<br>";
rules.fence = (tokens, idx) => {
  const token = tokens[idx];
  // Without the line break that ends the last line, and, while the fence is still open,
  // without the blank lines that are just the end of the text so far.
  let code = token.content.replace(/\n$/, "");
  if (!token.meta?.closed) code = code.replace(/(?:\n[ \t]*)+$/, "");
  const lang = token.info.trim().split(/\s+/)[0];
  return `<pre class="md-code"><code${lang ? ` data-lang="${escapeHtml(lang)}"` : ""}>${escapeHtml(code)}</code></pre>`;
};
