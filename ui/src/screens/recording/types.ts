/** Shapes of the sessions.* results (docs/commands.md: SessionSummary, WriterReport). */
export interface Session {
  id: number;
  title: string;
  startedUnixMs: number;
  endedUnixMs?: number | null;
  tags: string[];
  chunks: number;
  bytes: number;
  frames: number;
  droppedChunks: number;
  droppedFrames: number;
  durationS: number;
}

export interface WriterReport {
  id: number;
  chunks: number;
  bytes: number;
  frames: number;
  droppedChunks: number;
  droppedFrames: number;
  errors: number;
}

export interface Listing {
  database?: string | null;
  sessions: Session[];
  recording?: WriterReport | null;
}
