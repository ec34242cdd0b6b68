/** CSV text of plotted data: one column per series; RFC 4180 quoting for headers. */
export function toCsv(headers: string[], columns: ArrayLike<number | null | undefined>[]): string {
  const q = (s: string) => (/[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const rows = [headers.map(q).join(",")];
  const n = columns.reduce((m, c) => Math.max(m, c.length), 0);
  for (let i = 0; i < n; i++) {
    rows.push(columns.map((c) => {
      const v = c[i];
      return v === null || v === undefined || !Number.isFinite(v) ? "" : String(v);
    }).join(","));
  }
  return rows.join("\n") + "\n";
}

/** Saves text or a data URL as a file through a temporary link. */
export function download(name: string, href: string) {
  const a = document.createElement("a");
  a.href = href;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

export function downloadText(name: string, text: string, type = "text/csv") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  download(name, url);
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
