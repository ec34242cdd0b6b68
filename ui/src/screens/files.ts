/** File choosing: the desktop app uses native dialogs (@tauri-apps/plugin-dialog) that
 *  give paths; a browser's file input gives a file's contents but no path, so callers that
 *  need a path on the machine running Sextant (saving) fall back to a typed one. */
import { isTauri } from "../lib/transport";

export interface Filter {
  name: string;
  extensions: string[];
}

export const PROJECT_FILTERS: Filter[] = [{ name: "Sextant project", extensions: ["json", "sextant"] }];
export const SSPROJ_FILTERS: Filter[] = [{ name: "Serial Studio project", extensions: ["ssproj", "json"] }];
export const CSV_FILTERS: Filter[] = [{ name: "CSV", extensions: ["csv"] }];
export const DB_FILTERS: Filter[] = [{ name: "SQLite", extensions: ["sqlite", "db", "sqlite3"] }];
export type ExportFormat = "csv" | "mcap" | "parquet";

/** A recorded session's export, by format. */
export const EXPORT_FILTERS: Record<ExportFormat, Filter[]> = {
  csv: CSV_FILTERS,
  mcap: [{ name: "MCAP", extensions: ["mcap"] }],
  parquet: [{ name: "Parquet", extensions: ["parquet"] }],
};

export const canPick = (): boolean => isTauri();

/** The `accept` attribute of a browser file input for these filters: `.json,.sextant`. */
export function acceptOf(filters: Filter[]): string {
  return [...new Set(filters.flatMap((f) => f.extensions.map((e) => `.${e}`)))].join(",");
}

/** A path chosen in a native open dialog; null when cancelled or not in the desktop app. */
export async function pickOpen(filters: Filter[], defaultPath?: string): Promise<string | null> {
  if (!isTauri()) return null;
  const { open } = await import("@tauri-apps/plugin-dialog");
  const r = await open({ multiple: false, directory: false, filters, defaultPath });
  return typeof r === "string" ? r : null;
}

/** A path chosen in a native save dialog; null when cancelled or not in the desktop app. */
export async function pickSave(filters: Filter[], defaultPath?: string): Promise<string | null> {
  if (!isTauri()) return null;
  const { save } = await import("@tauri-apps/plugin-dialog");
  return (await save({ filters, defaultPath })) ?? null;
}

/** `path` named for `format`: one of the export extensions is replaced (`run.csv` →
 *  `run.mcap`), any other name keeps its own and gains the format's (`run.v2` →
 *  `run.v2.mcap`), so switching formats back and forth never stacks extensions. */
export function exportName(path: string, format: ExportFormat): string {
  return path.replace(/\.(csv|mcap|parquet)$/i, "") + "." + format;
}
