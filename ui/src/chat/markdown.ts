/** Markdown for the assistant's replies, as HTML that is safe to insert.
 *
 *  The model's text is untrusted (it may quote device data, project strings or a web page),
 *  so nothing in it ever becomes markup by itself: every character of the input is escaped,
 *  and the only tags in the output are the fixed ones this renderer writes – paragraphs,
 *  line breaks, headings, strong/em/del, inline code, fenced code blocks, lists, block
 *  quotes, rules, tables and links to http(s) URLs (`target="_blank" rel="noopener
 *  noreferrer"`). No raw HTML, no images, no other URL schemes.
 *
 *  Streaming-safe: the text is re-rendered as it grows, so every half-written construct
 *  renders as something sensible – an unclosed fence is a code block to the end, an
 *  unclosed `**`, backtick or `[link](` is plain text until its closing part arrives. */

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** How deep lists and quotes may nest before their content is shown as plain paragraphs. */
const MAX_DEPTH = 16;

const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const LIST_ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:[ \t]+(.*)|[ \t]*)$/;
const TABLE_SEP = /^ *\|? *:?-+:? *(?:\| *:?-+:? *)*\|? *$/;

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
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      // Chat-sized: `#` is an h3, and so on down to h6.
      const level = Math.min(6, heading[1].length + 2);
      out += `<h${level}>${inline((heading[2] ?? "").trim())}</h${level}>`;
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
    if (line.includes("|") && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes("|")) {
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
      items[items.length - 1].push("");
      i++;
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
    if (!isBlank(last[last.length - 1]) && !FENCE.test(line) && !HEADING.test(line) && !QUOTE.test(line) && !RULE.test(line)) {
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
  let url = m[0].replace(/[.,;:!?*_~]+$/, "");
  while (url.endsWith(")") && (url.match(/\(/g)?.length ?? 0) < (url.match(/\)/g)?.length ?? 0)) url = url.slice(0, -1);
  return /^https?:\/\/./i.test(url) ? url : null;
}

/** Where the closing `delim` of emphasis opened at `from` is, or -1. */
function closing(s: string, delim: string, from: number): number {
  const ch = delim[0];
  for (let j = from; j < s.length; j++) {
    if (s[j] === "\\") {
      j++;
      continue;
    }
    if (s[j] === "`") {
      // Code spans bind tighter than emphasis: skip over a closed one.
      let n = 1;
      while (s[j + n] === "`") n++;
      const end = s.indexOf("`".repeat(n), j + n);
      if (end >= 0) j = end + n - 1;
      continue;
    }
    if (!s.startsWith(delim, j)) continue;
    let run = 1;
    while (s[j + run] === ch) run++;
    if (delim.length === 1 && run === 2) {
      j += 1; // a `**` inside `*…*` belongs to nested strong text
      continue;
    }
    if (isSpace(s[j - 1])) {
      j += run - 1;
      continue;
    }
    if (ch === "_" && isWord(s[j + delim.length])) continue;
    // A longer run closes with its last characters (`*a **b***`: the `*` is the last one).
    return j + Math.max(0, run - delim.length);
  }
  return -1;
}

function inline(s: string, inLink = false): string {
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
      let n = 1;
      while (s[i + n] === "`") n++;
      const fence = "`".repeat(n);
      let end = s.indexOf(fence, i + n);
      while (end >= 0 && s[end + n] === "`") {
        let k = end;
        while (s[k] === "`") k++;
        end = s.indexOf(fence, k);
      }
      if (end < 0) {
        out += escapeHtml(fence);
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
      let run = 1;
      while (s[i + run] === c) run++;
      const intraword = c === "_" && isWord(s[i - 1]);
      const delims = c === "~" ? (run === 2 ? ["~~"] : []) : run >= 3 ? [c.repeat(3), c.repeat(2), c] : run === 2 ? [c.repeat(2)] : [c];
      let done = false;
      for (const d of delims) {
        if (intraword || isSpace(s[i + d.length])) break;
        const j = closing(s, d, i + d.length);
        if (j < 0) continue;
        const inner = inline(s.slice(i + d.length, j), inLink);
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
    if (c === "[" && !inLink) {
      const m = linkAt(s, i);
      if (m) {
        const text = inline(m.text, true);
        out += /^https?:\/\/\S+$/i.test(m.url) ? link(m.url, text) : text;
        i = m.end;
        continue;
      }
      // A link still streaming in (`[text](https://exa`): plain text, not a link to half a URL.
      if (/^\[[^\]]*\]\(/.test(s.slice(i))) {
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
    out += escapeHtml(c);
    i++;
  }
  return out;
}

/** `[text](url "title")` at `s[i]`: the text, the URL and the index after it. */
function linkAt(s: string, i: number): { text: string; url: string; end: number } | null {
  let depth = 0;
  let j = i;
  for (; j < s.length; j++) {
    if (s[j] === "\\") j++;
    else if (s[j] === "[") depth++;
    else if (s[j] === "]" && --depth === 0) break;
  }
  if (j >= s.length || s[j + 1] !== "(") return null;
  let k = j + 2;
  let parens = 1;
  for (; k < s.length; k++) {
    if (s[k] === "(") parens++;
    else if (s[k] === ")" && --parens === 0) break;
  }
  if (k >= s.length) return null;
  const target = s.slice(j + 2, k).trim();
  const url = target.replace(/\s+("[^"]*"|'[^']*')$/, "").replace(/^<(.*)>$/, "$1");
  return { text: s.slice(i + 1, j), url, end: k + 1 };
}
