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

/** Saves bytes as a file. */
export function downloadBytes(name: string, bytes: Uint8Array<ArrayBuffer>, type: string) {
  const url = URL.createObjectURL(new Blob([bytes], { type }));
  download(name, url);
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** The bytes of standard, padded base64 text. */
export function base64Bytes(text: string): Uint8Array<ArrayBuffer> {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function downloadText(name: string, text: string, type = "text/csv") {
  const url = URL.createObjectURL(new Blob([text], { type }));
  download(name, url);
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
