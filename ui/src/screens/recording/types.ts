/** Shapes of the sessions.* results: a session and the recorder's report are generated
 *  from the Rust types (`sextant_sessions::SessionSummary`, `WriterReport`); the listing
 *  is the `sessions.list` result that holds them. */
import type { SessionSummary, WriterReport } from "../../lib/wire/types.gen";

export type Session = SessionSummary;
export type { WriterReport };

export interface Listing {
  database?: string | null;
  sessions: Session[];
  recording?: WriterReport | null;
}

/** What a recorded session exports as: `sessions.exportCsv`, or `sessions.export`'s formats. */
import type { ExportFormat } from "../files";
export type { ExportFormat };

/** A session as a file for a page to save: the `sessions.download` result. */
export interface SessionFile {
  name: string;
  format: ExportFormat;
  frames: number;
  size: number;
  base64: string;
}
