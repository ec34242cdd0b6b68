/** Markdown for the assistant's replies, as HTML that is safe to insert.
 *
 *  The model's text is untrusted (it may quote device data, project strings or a web page),
 *  so nothing in it ever becomes markup by itself: every character of the input is escaped,
 *  and the only tags in the output are the fixed ones this renderer writes – paragraphs,
 *  line breaks, headings, strong/em/del, inline code, fenced code blocks, lists, block
 *  quotes, rules, tables and links to http(s) URLs (`target="_blank" rel="noopener
 *  noreferrer"`). No raw HTML, no other URL schemes, and no images: a remote image would
 *  load the moment the reply renders (a tracking pixel, or data leaked in its URL), so
 *  `![alt](url)` is a link to the URL that reads as its alt text, marked `md-image`.
 *
 *  Streaming-safe: the text is re-rendered as it grows, so every half-written construct
 *  renders as something sensible – an unclosed fence is a code block to the end, an
 *  unclosed `**`, backtick or `[link](` is plain text until its closing part arrives. */

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** How deep lists and quotes may nest before their content is shown as plain paragraphs,
 *  and emphasis before its markers are shown as plain text. */
const MAX_DEPTH = 16;

// Every pattern and scan here is linear in its line (the text is untrusted and re-rendered
// on every streamed piece). `.` stops at U+2028/U+2029, so a line holding one never matches
// FENCE or LIST_ITEM; their lookahead says so in one pass, where the pattern itself would
// backtrack quadratically over a long run of backticks or blanks first.
const FENCE = /^(?=[^\u2028\u2029]*$) {0,3}(`{3,}|~{3,})(.*)$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^(?=[^\u2028\u2029]*$)( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*)$/;

const isBlankChar = (c: string | undefined) => c === " " || c === "\t";

/** An ATX heading (`## Title ##`): its level (the number of `#`s) and its text, or null.
 *  By hand, as the pattern `^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$` did it in
 *  quadratic time over a long run of blanks; same result. */
function heading(line: string): { level: number; text: string } | null {
  let i = 0;
  while (i < 3 && line[i] === " ") i++;
  let h = i;
  while (line[h] === "#") h++;
  const level = h - i;
  if (level < 1 || level > 6) return null;
  if (h === line.length) return { level, text: "" };
  if (!isBlankChar(line[h])) return null;
  let start = h;
  while (isBlankChar(line[start])) start++;
  // `.` stops at a line separator, and a line holding one is no heading.
  if (/[\u2028\u2029]/.test(line.slice(start))) return null;
  // The text ends before trailing blanks, and before a closing run of `#`s that a blank
  // separates from it.
  let end = line.length;
  while (end > start && isBlankChar(line[end - 1])) end--;
  if (end > start && line[end - 1] === "#") {
    let hashes = end - 1;
    while (hashes > start && line[hashes - 1] === "#") hashes--;
    let blanks = hashes;
    while (blanks > start && isBlankChar(line[blanks - 1])) blanks--;
    if (blanks < hashes) end = blanks;
  }
  return { level, text: line.slice(start, end) };
}

/** A table's delimiter row (`|:--|--:|`), as `^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$` would
 *  match it – by hand, as that pattern backtracked quadratically over runs of spaces. */
function isTableSep(line: string): boolean {
  let k = 0;
  const spaces = () => {
    while (line[k] === " ") k++;
  };
  // `:?-+:? *` at k; moves k past it when it is there.
  const cell = () => {
    let j = k;
    if (line[j] === ":") j++;
    const dashes = j;
    while (line[j] === "-") j++;
    if (j === dashes) return false;
    if (line[j] === ":") j++;
    k = j;
    spaces();
    return true;
  };
  spaces();
  if (line[k] === "|") k++;
  spaces();
  if (!cell()) return false;
  while (line[k] === "|") {
    const pipe = k++;
    spaces();
    if (!cell()) {
      k = pipe; // the closing pipe
      break;
    }
  }
  if (line[k] === "|") k++;
  spaces();
  return k === line.length;
}

/** Renders `src` (Markdown) as safe HTML. */
export function renderMarkdown(src: string): string {
  const lines = src.replace(/\r\n?/g, "\n").split("\n").map(expandTabs);
  return blocks(lines, 0);
}

function expandTabs(line: string): string {
  const m = /^[ \t]+/.exec(line);
  return m ? m[0].replace(/\t/g, "    ") + line.slice(m[0].length) : line;
}

function indentOf(line: string): number {
  return /^ */.exec(line)![0].length;
}

const isBlank = (line: string) => line.trim() === "";

function blocks(lines: string[], depth: number): string {
  let out = "";
  let para: string[] = [];
  const flush = () => {
    if (para.length) out += `<p>${para.map((l) => inline(l.trim())).join("<br>")}</p>`;
    para = [];
  };
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = FENCE.exec(line);
    if (fence && !(fence[1][0] === "`" && fence[2].includes("`"))) {
      flush();
      const [marker, info] = [fence[1], fence[2].trim()];
      const close = new RegExp(`^ {0,3}${marker[0] === "`" ? "`" : "~"}{${marker.length},}[ \\t]*$`);
      const body: string[] = [];
      i++;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      const closed = i < lines.length;
      i++;
      // While streaming, the fence is still open: show what has arrived, without the
      // blank line that is just the end of the text so far.
      if (!closed) while (body.length && isBlank(body[body.length - 1])) body.pop();
      const lang = info.split(/\s+/)[0];
      out += `<pre class="md-code"><code${lang ? ` data-lang="${escapeHtml(lang)}"` : ""}>${escapeHtml(body.join("\n"))}</code></pre>`;
      continue;
    }
    if (isBlank(line)) {
      flush();
      i++;
      continue;
    }
    const head = heading(line);
    if (head) {
      flush();
      // Chat-sized: `#` is an h3, and so on down to h6.
      const level = Math.min(6, head.level + 2);
      out += `<h${level}>${inline(head.text.trim())}</h${level}>`;
      i++;
      continue;
    }
    if (RULE.test(line)) {
      flush();
      out += "<hr>";
      i++;
      continue;
    }
    if (depth < MAX_DEPTH && QUOTE.test(line)) {
      flush();
      const inner: string[] = [];
      while (i < lines.length && !isBlank(lines[i])) {
        const q = QUOTE.exec(lines[i]);
        inner.push(q ? q[1] : lines[i]);
        i++;
      }
      out += `<blockquote>${blocks(inner, depth + 1)}</blockquote>`;
      continue;
    }
    if (depth < MAX_DEPTH && LIST_ITEM.test(line)) {
      flush();
      const [html, next] = list(lines, i, depth);
      out += html;
      i = next;
      continue;
    }
    if (line.includes("|") && i + 1 < lines.length && isTableSep(lines[i + 1]) && lines[i + 1].includes("|")) {
      const head = cells(line);
      const aligns = cells(lines[i + 1]).map((c) => {
        const left = c.startsWith(":");
        const right = c.endsWith(":");
        return left && right ? "center" : right ? "right" : left ? "left" : "";
      });
      if (head.length === aligns.length) {
        flush();
        i += 2;
        const rows: string[][] = [];
        while (i < lines.length && !isBlank(lines[i]) && lines[i].includes("|")) rows.push(cells(lines[i++]));
        const cell = (tag: string, text: string, k: number) =>
          `<${tag}${aligns[k] ? ` style="text-align: ${aligns[k]}"` : ""}>${inline(text)}</${tag}>`;
        out += `<table><thead><tr>${head.map((c, k) => cell("th", c, k)).join("")}</tr></thead>`;
        if (rows.length) {
          out += `<tbody>${rows.map((r) => `<tr>${aligns.map((_, k) => cell("td", r[k] ?? "", k)).join("")}</tr>`).join("")}</tbody>`;
        }
        out += "</table>";
        continue;
      }
    }
    para.push(line);
    i++;
  }
  flush();
  return out;
}

/** A table row's cells: split at `|` (not `\|`), outer pipes dropped. */
function cells(row: string): string[] {
  let s = row.trim();
  if (s.startsWith("|")) s = s.slice(1);
  if (s.endsWith("|") && !s.endsWith("\\|")) s = s.slice(0, -1);
  return s.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
}

/** A list starting at `lines[start]`; returns its HTML and the index after it. */
function list(lines: string[], start: number, depth: number): [string, number] {
  const first = LIST_ITEM.exec(lines[start])!;
  const base = first[1].length;
  const ordered = /\d/.test(first[2]);
  const items: string[][] = [];
  let contentIndent = 0;
  let i = start;
  let loose = false;
  while (i < lines.length) {
    const line = lines[i];
    const m = LIST_ITEM.exec(line);
    if (m && m[1].length <= base + 1 && !RULE.test(line)) {
      if (m[1].length < base || /\d/.test(m[2]) !== ordered) break;
      items.push([m[3] ?? ""]);
      contentIndent = m[1].length + m[2].length + 1;
      i++;
      continue;
    }
    if (isBlank(line)) {
      // A blank line ends the list unless the list (or this item) goes on after it.
      let j = i + 1;
      while (j < lines.length && isBlank(lines[j])) j++;
      if (j >= lines.length) break;
      const next = LIST_ITEM.exec(lines[j]);
      const continues = indentOf(lines[j]) > base + 1 || (next && next[1].length === base && /\d/.test(next[2]) === ordered);
      if (!continues) break;
      loose = true;
      // All the blank lines at once (one at a time looked ahead over all of them each time).
      for (; i < j; i++) items[items.length - 1].push("");
      continue;
    }
    const indent = indentOf(line);
    if (indent > base) {
      items[items.length - 1].push(line.slice(Math.min(indent, contentIndent)));
      i++;
      continue;
    }
    // A lazy continuation of the item's text (not after a blank line, not a new block).
    const last = items[items.length - 1];
    if (!isBlank(last[last.length - 1]) && !FENCE.test(line) && !heading(line) && !QUOTE.test(line) && !RULE.test(line)) {
      last.push(line.trim());
      i++;
      continue;
    }
    break;
  }
  const tag = ordered ? "ol" : "ul";
  const n = ordered ? parseInt(first[2], 10) : 1;
  const startAttr = ordered && n !== 1 ? ` start="${n}"` : "";
  const body = items
    .map((item) => {
      let html = blocks(item, depth + 1);
      // Tight lists: the item's first paragraph without <p>.
      if (!loose) html = html.replace(/^<p>([\s\S]*?)<\/p>/, "$1");
      return `<li>${html}</li>`;
    })
    .join("");
  return [`<${tag}${startAttr}>${body}</${tag}>`, i];
}

const PUNCT = /[!-/:-@[-`{-~]/;
const isSpace = (c: string | undefined) => c === undefined || /\s/.test(c);
const isWord = (c: string | undefined) => c !== undefined && /[\p{L}\p{N}_]/u.test(c);

function link(url: string, text: string): string {
  return `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${text}</a>`;
}

/** A bare URL at `s[i]`, without trailing punctuation; null if there is none. */
function bareUrl(s: string, i: number): string | null {
  const m = /^https?:\/\/[^\s<>"'`]+/i.exec(s.slice(i));
  if (!m) return null;
  // Trailing punctuation off, then unbalanced closing parentheses – counted once, not
  // once per parenthesis removed.
  let end = m[0].length;
  while (end > 0 && ".,;:!?*_~".includes(m[0][end - 1])) end--;
  let url = m[0].slice(0, end);
  const opens = url.split("(").length - 1;
  let closes = url.split(")").length - 1;
  while (url.endsWith(")") && opens < closes) {
    url = url.slice(0, -1);
    closes--;
  }
  return /^https?:\/\/./i.test(url) ? url : null;
}

/** Not looked up yet. */
const UNKNOWN = -2;

/** A line of inline text, with the look-ups that parsing it needs. Each table is built on
 *  first use in one pass over the line, or remembers every search it did, so that no
 *  search for a closing marker scans the rest of the line afresh for each opener without
 *  one – which made `"*a ".repeat(n)`, `"x _a".repeat(n)` or `"[".repeat(n)` quadratic. */
class Line {
  private runStart = 0;
  private runEnd_ = 0;
  private closers: Map<string, Map<number, number>> | undefined;
  private noTicks: Map<number, number> | undefined;
  private tickRuns: Map<number, number[]> | undefined;
  private brackets: number[] | undefined;
  private parens: number[] | undefined;
  private nextBracket = UNKNOWN;

  constructor(readonly s: string) {}

  /** The index after the run of equal characters that `s[j]` starts (the last run found
   *  is remembered: scans step through a long run one place at a time). */
  runEnd(j: number): number {
    const s = this.s;
    if (j >= this.runStart && j < this.runEnd_) return this.runEnd_;
    let end = j + 1;
    while (end < s.length && s[end] === s[j]) end++;
    this.runStart = j;
    this.runEnd_ = end;
    return end;
  }

  /** Where the closing `delim` of emphasis opened before `from` is, or -1.
   *
   *  A scan to the right that skips escaped characters and code spans. Where it goes next
   *  depends only on where it is, so scans from different openers that reach the same
   *  place end alike: each marker, backslash and backtick a scan stops at is remembered
   *  with its result, and a later scan ends at the first remembered one. (Two scans part
   *  ways only at a backslash or backtick and, once together again, stop at the same next
   *  marker, backslash or backtick.) */
  closing(delim: string, from: number): number {
    const s = this.s;
    this.closers ??= new Map();
    let known = this.closers.get(delim);
    if (!known) this.closers.set(delim, (known = new Map()));
    const ch = delim[0];
    const passed: number[] = [];
    let found = -1;
    for (let j = from; j < s.length; j++) {
      if (s[j] === ch || s[j] === "\\" || s[j] === "`") {
        const result = known.get(j);
        if (result !== undefined) {
          found = result;
          break;
        }
        passed.push(j);
      }
      if (s[j] === "\\") {
        j++;
        continue;
      }
      if (s[j] === "`") {
        // Code spans bind tighter than emphasis: skip over a closed one.
        const n = this.runEnd(j) - j;
        const end = this.backticks(n, j + n);
        if (end >= 0) j = end + n - 1;
        continue;
      }
      if (!s.startsWith(delim, j)) continue;
      const run = this.runEnd(j) - j;
      if (delim.length === 1 && run === 2) {
        j += 1; // a `**` inside `*…*` belongs to nested strong text
        continue;
      }
      if (isSpace(s[j - 1])) {
        j += run - 1;
        continue;
      }
      if (ch === "_" && isWord(s[j + delim.length])) {
        // Within a longer run of `_`, the places up to its last `delim` all go on like
        // this one (one at a time, that would be quadratic in the run): skip there.
        const end = this.runEnd(j);
        if (j + delim.length < end) j = delim.length === 1 ? end - 1 : end - delim.length - 1;
        continue;
      }
      // A longer run closes with its last characters (`*a **b***`: the `*` is the last one).
      found = j + Math.max(0, run - delim.length);
      break;
    }
    for (const j of passed) known.set(j, found);
    return found;
  }

  /** The first `n` backticks in a row at or after `from`, or -1 (a search that found none
   *  is not repeated from further on). */
  private backticks(n: number, from: number): number {
    this.noTicks ??= new Map();
    const none = this.noTicks.get(n);
    if (none !== undefined && from >= none) return -1;
    const at = this.s.indexOf("`".repeat(n), from);
    if (at < 0) this.noTicks.set(n, from);
    return at;
  }

  /** Where the code span whose `n` backticks end at `from` closes: the first run of
   *  exactly `n` backticks after it, or -1. */
  codeEnd(n: number, from: number): number {
    if (!this.tickRuns) {
      const runs = (this.tickRuns = new Map<number, number[]>());
      for (let j = this.s.indexOf("`"); j >= 0; j = this.s.indexOf("`", j)) {
        const end = this.runEnd(j);
        const starts = runs.get(end - j);
        if (starts) starts.push(j);
        else runs.set(end - j, [j]);
        j = end;
      }
    }
    // The opening run ends at `from`, so the runs from there on are all whole ones.
    const starts = this.tickRuns.get(n);
    if (!starts) return -1;
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (starts[mid] < from) lo = mid + 1;
      else hi = mid;
    }
    return lo < starts.length ? starts[lo] : -1;
  }

  /** `[text](url "title")` at `s[i]`: the text, the URL and the index after it. */
  linkAt(i: number): { text: string; url: string; end: number } | null {
    const s = this.s;
    this.brackets ??= partners(s, "[", "]", true);
    const j = this.brackets[i];
    if (j < 0 || s[j + 1] !== "(") return null;
    this.parens ??= partners(s, "(", ")", false);
    const k = this.parens[j + 1];
    if (k < 0) return null;
    const target = s.slice(j + 2, k).trim();
    const url = target.replace(/\s+("[^"]*"|'[^']*')$/, "").replace(/^<(.*)>$/, "$1");
    return { text: s.slice(i + 1, j), url, end: k + 1 };
  }

  /** Whether the first `]` after the `[` at `i` is followed by `(`: a link whose URL is
   *  still streaming in. `i` only grows from one call to the next. */
  openLink(i: number): boolean {
    if (this.nextBracket !== -1 && this.nextBracket <= i) this.nextBracket = this.s.indexOf("]", i + 1);
    return this.nextBracket >= 0 && this.s[this.nextBracket + 1] === "(";
  }
}

/** For each `open` in `s`, the `close` that balances it – the first one after it where the
 *  count of opened minus closed ones, counted from it, drops to zero – or -1. With
 *  `escapes`, a backslash hides the character after it.
 *
 *  One pass for all of them: the running count from the start of `s` is kept, and the
 *  partner of an `open` at p is the first place after p where that count is one below its
 *  value at p. (A count from p skips the same escaped characters after p as the count from
 *  the start does: both are at p + 1 next, whether or not p itself was escaped.) */
function partners(s: string, open: string, close: string, escapes: boolean): number[] {
  const n = s.length;
  // The count after each place, then (from the right) each `open`'s partner in its stead.
  const at = new Array<number>(n);
  let d = 0;
  let low = 0;
  let high = 0;
  for (let j = 0; j < n; j++) {
    if (escapes && s[j] === "\\") {
      at[j] = d;
      if (j + 1 < n) at[j + 1] = d;
      j++;
      continue;
    }
    if (s[j] === open) high = Math.max(high, ++d);
    else if (s[j] === close) low = Math.min(low, --d);
    at[j] = d;
  }
  // next[v - low + 1]: the first place right of the current one where the count is v.
  const next = new Array<number>(high - low + 2).fill(-1);
  for (let p = n - 1; p >= 0; p--) {
    const count = at[p];
    at[p] = s[p] === open ? next[count - low] : -1;
    next[count - low + 1] = p;
  }
  return at;
}

function inline(s: string, inLink = false, depth = 0): string {
  let line: Line | undefined;
  let out = "";
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (c === "\\" && i + 1 < s.length && PUNCT.test(s[i + 1])) {
      out += escapeHtml(s[i + 1]);
      i += 2;
      continue;
    }
    if (c === "`") {
      line ??= new Line(s);
      const n = line.runEnd(i) - i;
      const end = line.codeEnd(n, i + n);
      if (end < 0) {
        out += escapeHtml("`".repeat(n));
        i += n;
        continue;
      }
      let code = s.slice(i + n, end);
      if (code.length > 2 && code.startsWith(" ") && code.endsWith(" ") && code.trim()) code = code.slice(1, -1);
      out += `<code>${escapeHtml(code)}</code>`;
      i = end + n;
      continue;
    }
    if (c === "*" || c === "_" || c === "~") {
      line ??= new Line(s);
      const run = line.runEnd(i) - i;
      const intraword = c === "_" && isWord(s[i - 1]);
      // Nested too deep (only ever on purpose): the markers are plain text.
      const delims =
        depth >= MAX_DEPTH ? [] : c === "~" ? (run === 2 ? ["~~"] : []) : run >= 3 ? [c.repeat(3), c.repeat(2), c] : run === 2 ? [c.repeat(2)] : [c];
      let done = false;
      for (const d of delims) {
        if (intraword || isSpace(s[i + d.length])) break;
        const j = line.closing(d, i + d.length);
        if (j < 0) continue;
        const inner = inline(s.slice(i + d.length, j), inLink, depth + 1);
        out +=
          d === "~~" ? `<del>${inner}</del>` : d.length === 3 ? `<strong><em>${inner}</em></strong>` : d.length === 2 ? `<strong>${inner}</strong>` : `<em>${inner}</em>`;
        i = j + d.length;
        done = true;
        break;
      }
      if (!done) {
        out += escapeHtml(c.repeat(run));
        i += run;
      }
      continue;
    }
    if (c === "!" && s[i + 1] === "[") {
      line ??= new Line(s);
      const m = line.linkAt(i + 1);
      if (m) {
        // Alt text is text: no emphasis or links of its own.
        const alt = escapeHtml(m.text.replace(/\\([!-/:-@[-`{-~])/g, "$1"));
        const safe = /^https?:\/\/\S+$/i.test(m.url);
        // Inside a link (`[![badge](img)](href)`) the outer link is the one to follow.
        if (inLink || !safe) out += alt;
        else out += `<a class="md-image" href="${escapeHtml(m.url)}" target="_blank" rel="noopener noreferrer">${alt || escapeHtml(m.url)}</a>`;
        i = m.end;
        continue;
      }
    }
    if (c === "[" && !inLink) {
      line ??= new Line(s);
      const m = line.linkAt(i);
      if (m) {
        const text = inline(m.text, true, depth + 1);
        out += /^https?:\/\/\S+$/i.test(m.url) ? link(m.url, text) : text;
        i = m.end;
        continue;
      }
      // A link still streaming in (`[text](https://exa`): plain text, not a link to half a URL.
      if (line.openLink(i)) {
        out += escapeHtml(s.slice(i));
        break;
      }
    }
    if (c === "<" && !inLink) {
      const m = /^<(https?:\/\/[^\s<>]+)>/i.exec(s.slice(i));
      if (m) {
        out += link(m[1], escapeHtml(m[1]));
        i += m[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && !inLink && !isWord(s[i - 1])) {
      const url = bareUrl(s, i);
      if (url) {
        out += link(url, escapeHtml(url));
        i += url.length;
        continue;
      }
    }
    out += ESCAPES[c] ?? c;
    i++;
  }
  return out;
}
