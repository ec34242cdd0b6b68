//! Browsing and editing recorded sessions: list, get, tag, rename, delete, export.
//!
//! A [`SessionStore`] is one connection to the database. Reads run in WAL snapshots, so
//! browsing or exporting a session that is still being recorded neither blocks the
//! recorder nor sees half a batch.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension, Row};
use schemars::JsonSchema;
use serde::Serialize;
use sextant_telemetry::csv::CsvWriter;
use sextant_telemetry::project::Project;
use sextant_telemetry::{Timestamp, Value};

use crate::writer::check_tag;
use crate::{codec, schema, SessionError, SessionId};

/// One session in a list.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub id: SessionId,
    pub title: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_unix_ms: i64,
    /// Wall-clock end (ms); absent while recording, or when the recording was cut short
    /// (a crash): what was committed until then is still there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_unix_ms: Option<i64>,
    pub tags: Vec<String>,
    /// Raw chunks recorded.
    pub chunks: u64,
    /// Raw bytes recorded.
    pub bytes: u64,
    /// Parsed frames recorded.
    pub frames: u64,
    /// Raw chunks the recorder could not keep up with.
    pub dropped_chunks: u64,
    /// Parsed frames the recorder could not keep up with.
    pub dropped_frames: u64,
    /// From the first to the last recorded timestamp, in seconds.
    pub duration_s: f64,
}

/// Raw data recorded from one source of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceSummary {
    /// Index into the embedded project's sources.
    pub index: usize,
    pub chunks: u64,
    pub bytes: u64,
}

/// One session in full: its summary, columns, sources and embedded project.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionDetail {
    #[serde(flatten)]
    pub summary: SessionSummary,
    /// The CSV columns after `elapsed_s` (`Group/Dataset`), in order.
    pub columns: Vec<String>,
    pub sources: Vec<SourceSummary>,
    /// The project the session was recorded with.
    pub project: serde_json::Value,
}

/// A connection to a sessions database.
pub struct SessionStore {
    conn: Connection,
    path: PathBuf,
}

/// One share of a session's frames in a range, read on a thread of its own (see
/// [`SessionStore::shares`]): the first schema's frame rows or not, and a span of blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    legacy: bool,
    /// First and last block row, inclusive.
    blocks: (i64, i64),
}

impl Share {
    /// Every frame.
    pub const ALL: Share = Share {
        legacy: true,
        blocks: (i64::MIN, i64::MAX),
    };
}

/// Blocks a share has at least: a block is ~1 024 frames, decoded in well under a
/// millisecond, so a thread for fewer would cost more than it saves.
const MIN_SHARE_BLOCKS: usize = 16;

/// A range in a session's stored clock (see `SessionStore::range_ns`).
struct RangeNs {
    origin: u64,
    lo: i64,
    hi: i64,
}

const SUMMARY_COLUMNS: &str = "id, title, started_unix_ns, ended_unix_ns, chunk_count, \
     byte_count, frame_count, dropped_chunks, dropped_frames, first_elapsed_ns, last_elapsed_ns";

fn summary(row: &Row<'_>) -> rusqlite::Result<SessionSummary> {
    let ns_to_ms = |ns: i64| ns.div_euclid(1_000_000);
    let first: Option<i64> = row.get(9)?;
    let last: Option<i64> = row.get(10)?;
    let duration_ns = match (first, last) {
        (Some(f), Some(l)) => l.saturating_sub(f).max(0),
        _ => 0,
    };
    let count = |i: usize| row.get::<_, i64>(i).map(|n| n.max(0) as u64);
    Ok(SessionSummary {
        id: row.get(0)?,
        title: row.get(1)?,
        started_unix_ms: ns_to_ms(row.get(2)?),
        ended_unix_ms: row.get::<_, Option<i64>>(3)?.map(ns_to_ms),
        tags: Vec::new(),
        chunks: count(4)?,
        bytes: count(5)?,
        frames: count(6)?,
        dropped_chunks: count(7)?,
        dropped_frames: count(8)?,
        duration_s: duration_ns as f64 / 1e9,
    })
}

impl SessionStore {
    /// Opens the database at `path`, creating it if missing and migrating an older one.
    pub fn open(path: impl AsRef<Path>) -> Result<SessionStore, SessionError> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open(&path)?;
        Ok(SessionStore { conn, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every session, oldest first; only those carrying `tag` when given.
    pub fn list(&self, tag: Option<&str>) -> Result<Vec<SessionSummary>, SessionError> {
        let mut tags: HashMap<SessionId, Vec<String>> = HashMap::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT session, tag FROM session_tags ORDER BY session, tag")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            for row in rows {
                let (id, tag) = row?;
                tags.entry(id).or_default().push(tag);
            }
        }
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM sessions ORDER BY id"
        ))?;
        let rows = stmt.query_map([], summary)?;
        let mut out = Vec::new();
        for row in rows {
            let mut s = row?;
            s.tags = tags.remove(&s.id).unwrap_or_default();
            if tag.is_none_or(|t| s.tags.iter().any(|have| have == t)) {
                out.push(s);
            }
        }
        Ok(out)
    }

    /// One session's summary.
    pub fn summary(&self, id: SessionId) -> Result<SessionSummary, SessionError> {
        let mut s = self
            .conn
            .query_row(
                &format!("SELECT {SUMMARY_COLUMNS} FROM sessions WHERE id = ?1"),
                [id],
                summary,
            )
            .optional()?
            .ok_or(SessionError::NotFound(id))?;
        s.tags = self.tags(id)?;
        Ok(s)
    }

    /// One session in full.
    pub fn get(&self, id: SessionId) -> Result<SessionDetail, SessionError> {
        let summary = self.summary(id)?;
        let project_text: String =
            self.conn
                .query_row("SELECT project FROM sessions WHERE id = ?1", [id], |r| {
                    r.get(0)
                })?;
        let project = serde_json::from_str(&project_text).map_err(|e| SessionError::Corrupt {
            session: id,
            detail: format!("the embedded project is not JSON: {e}"),
        })?;
        // Blocks (schema version 2 on) and single rows (recorded before it).
        let mut stmt = self.conn.prepare(
            "SELECT source, total(n), total(b) FROM ( \
                 SELECT source, 1 AS n, length(bytes) AS b FROM chunks WHERE session = ?1 \
                 UNION ALL \
                 SELECT source, chunk_count, byte_count FROM chunk_blocks WHERE session = ?1 \
             ) GROUP BY source ORDER BY source",
        )?;
        let sources = stmt
            .query_map([id], |r| {
                Ok(SourceSummary {
                    index: r.get::<_, i64>(0)?.max(0) as usize,
                    chunks: r.get::<_, f64>(1)?.max(0.0) as u64,
                    bytes: r.get::<_, f64>(2)?.max(0.0) as u64,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SessionDetail {
            summary,
            columns: self.columns(id)?,
            sources,
            project,
        })
    }

    /// The project a session was recorded with, loaded and validated.
    pub fn project(&self, id: SessionId) -> Result<Project, SessionError> {
        let text: String = self
            .conn
            .query_row("SELECT project FROM sessions WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?
            .ok_or(SessionError::NotFound(id))?;
        Project::from_json_str(&text).map_err(|e| SessionError::Corrupt {
            session: id,
            detail: format!("the embedded project does not load: {e}"),
        })
    }

    /// The CSV columns of a session, in order (empty until its first frame is recorded).
    pub fn columns(&self, id: SessionId) -> Result<Vec<String>, SessionError> {
        let mut stmt = self
            .conn
            .prepare("SELECT column_name FROM datasets WHERE session = ?1 ORDER BY position")?;
        let columns = stmt
            .query_map([id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(columns)
    }

    fn tags(&self, id: SessionId) -> Result<Vec<String>, SessionError> {
        let mut stmt = self
            .conn
            .prepare("SELECT tag FROM session_tags WHERE session = ?1 ORDER BY tag")?;
        let tags = stmt
            .query_map([id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(tags)
    }

    fn ensure(&self, id: SessionId) -> Result<(), SessionError> {
        let found: bool = self.conn.query_row(
            "SELECT count(*) > 0 FROM sessions WHERE id = ?1",
            [id],
            |r| r.get(0),
        )?;
        if found {
            Ok(())
        } else {
            Err(SessionError::NotFound(id))
        }
    }

    /// Adds a tag (adding one twice is not an error); returns the session's tags.
    pub fn tag(&self, id: SessionId, tag: &str) -> Result<Vec<String>, SessionError> {
        let tag = check_tag(tag)?;
        self.ensure(id)?;
        self.conn.execute(
            "INSERT OR IGNORE INTO session_tags (session, tag) VALUES (?1, ?2)",
            params![id, tag],
        )?;
        self.tags(id)
    }

    /// Removes a tag (removing one that is not there is not an error); returns the tags.
    pub fn untag(&self, id: SessionId, tag: &str) -> Result<Vec<String>, SessionError> {
        self.ensure(id)?;
        self.conn.execute(
            "DELETE FROM session_tags WHERE session = ?1 AND tag = ?2",
            params![id, tag.trim()],
        )?;
        self.tags(id)
    }

    pub fn rename(&self, id: SessionId, title: &str) -> Result<(), SessionError> {
        let title = title.trim();
        if title.is_empty() || title.chars().any(char::is_control) {
            return Err(SessionError::Invalid(
                "a session title must be one non-empty line".into(),
            ));
        }
        let n = self.conn.execute(
            "UPDATE sessions SET title = ?2 WHERE id = ?1",
            params![id, title],
        )?;
        if n == 0 {
            return Err(SessionError::NotFound(id));
        }
        Ok(())
    }

    /// Deletes a session and all its rows. The file does not shrink until [`vacuum`]
    /// (freed pages are reused by later recordings).
    ///
    /// [`vacuum`]: SessionStore::vacuum
    pub fn delete(&mut self, id: SessionId) -> Result<(), SessionError> {
        let tx = self.conn.transaction()?;
        for table in [
            "chunks",
            "chunk_blocks",
            "frames",
            "frame_blocks",
            "datasets",
            "session_tags",
        ] {
            tx.execute(&format!("DELETE FROM {table} WHERE session = ?1"), [id])?;
        }
        let n = tx.execute("DELETE FROM sessions WHERE id = ?1", [id])?;
        if n == 0 {
            return Err(SessionError::NotFound(id));
        }
        tx.commit()?;
        Ok(())
    }

    /// Rewrites the file without the space deleted sessions left (slow on big files, and
    /// it waits for a running recording's transactions).
    pub fn vacuum(&self) -> Result<(), SessionError> {
        self.conn.execute_batch("VACUUM")?;
        Ok(())
    }

    /// Calls `f(elapsed, source, values)` for every recorded frame, in recorded order.
    pub fn for_each_frame(
        &self,
        id: SessionId,
        mut f: impl FnMut(Timestamp, usize, &[Value]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        self.ensure(id)?;
        let corrupt = |detail: String| SessionError::Corrupt {
            session: id,
            detail,
        };
        let at = |elapsed_ns: u64| Timestamp {
            elapsed_ns,
            unix_ns: 0,
        };
        let mut n = 0u64;
        // Rowid order is the order the pipeline produced the frames in; the index on
        // `session` keeps rowids sorted, so neither query needs a sort. A session has rows
        // in one of the two tables: `frames` if recorded before schema version 2.
        let mut stmt = self.conn.prepare(
            "SELECT elapsed_ns, source, vals FROM frames WHERE session = ?1 ORDER BY rowid",
        )?;
        let mut rows = stmt.query([id])?;
        let mut values = Vec::new();
        while let Some(row) = rows.next()? {
            let elapsed_ns = row.get::<_, i64>(0)?.max(0) as u64;
            let source = row.get::<_, i64>(1)?.max(0) as usize;
            let blob = row
                .get_ref(2)?
                .as_blob()
                .map_err(|e| corrupt(format!("values are not a blob: {e}")))?;
            codec::decode_into(blob, &mut values).map_err(corrupt)?;
            f(at(elapsed_ns), source, &values)?;
            n += 1;
        }
        let mut stmt = self.conn.prepare(
            "SELECT first_elapsed_ns, data FROM frame_blocks WHERE session = ?1 ORDER BY rowid",
        )?;
        let mut rows = stmt.query([id])?;
        while let Some(row) = rows.next()? {
            // The block wrote the time's bits as they were: read them back the same way.
            let first_ns = row.get::<_, i64>(0)? as u64;
            let blob = row
                .get_ref(1)?
                .as_blob()
                .map_err(|e| corrupt(format!("a frame block is not a blob: {e}")))?;
            n += codec::for_each_in_block(blob, first_ns, |source, t, values| {
                f(at(t), source, values)
            })
            .map_err(corrupt)??;
        }
        Ok(n)
    }

    /// Calls `f(t, source, values)` for every frame whose time `t` – seconds from the
    /// session's first frame, the `elapsed_s` of its CSV export – lies in `from_s..=to_s`,
    /// in recorded order. Blocks wholly outside the range are skipped unread, so a short
    /// range of a long session reads little; memory never grows with the session.
    pub fn for_each_frame_between(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        mut f: impl FnMut(f64, usize, &[Value]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        let mut values = Vec::new();
        self.for_each_encoded_between(id, from_s, to_s, &Share::ALL, |t, source, encoded| {
            codec::decode_into(encoded, &mut values).map_err(|detail| SessionError::Corrupt {
                session: id,
                detail,
            })?;
            f(t, source, &values)
        })
    }

    /// As [`for_each_frame_between`](Self::for_each_frame_between), with only the values at
    /// the positions `wanted` decoded, in that order ([`codec::Cell`]): what an analysis of
    /// some columns of a long session reads, without building every value of every frame.
    pub fn for_each_cells_between(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        wanted: &[usize],
        f: impl FnMut(f64, &[codec::Cell]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        self.cells(id, from_s, to_s, &Share::ALL, wanted, f)
    }

    /// Splits the frames in `from_s..=to_s` into at most `most` shares of about as many
    /// blocks each, in recorded order: read one share a thread (each on a store of its
    /// own, [`for_each_cells_in_share`](Self::for_each_cells_in_share)), then put the
    /// results together in the shares' order, and every frame has been seen once, as one
    /// walk would have seen it. A range of few blocks is one share: a thread would cost
    /// more than it saves.
    pub fn shares(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        most: usize,
    ) -> Result<Vec<Share>, SessionError> {
        self.ensure(id)?;
        let Some(range) = self.range_ns(id, from_s, to_s)? else {
            return Ok(vec![Share::ALL]);
        };
        let mut stmt = self.conn.prepare(
            "SELECT rowid FROM frame_blocks WHERE session = ?1 \
             AND max_elapsed_ns >= ?2 AND min_elapsed_ns <= ?3 ORDER BY rowid",
        )?;
        let rows = stmt
            .query_map(params![id, range.lo, range.hi], |r| r.get::<_, i64>(0))?
            .collect::<Result<Vec<i64>, _>>()?;
        let n = most.min(rows.len() / MIN_SHARE_BLOCKS).max(1);
        if n == 1 {
            return Ok(vec![Share::ALL]);
        }
        let per = rows.len().div_ceil(n);
        Ok(rows
            .chunks(per)
            .enumerate()
            .map(|(k, chunk)| Share {
                // The frames of the first schema's rows come before every block.
                legacy: k == 0,
                blocks: (
                    if k == 0 { i64::MIN } else { chunk[0] },
                    if (k + 1) * per >= rows.len() {
                        i64::MAX
                    } else {
                        chunk[chunk.len() - 1]
                    },
                ),
            })
            .collect())
    }

    /// [`for_each_cells_between`](Self::for_each_cells_between) over one share of
    /// [`shares`](Self::shares).
    pub fn for_each_cells_in_share(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        share: &Share,
        wanted: &[usize],
        f: impl FnMut(f64, &[codec::Cell]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        self.cells(id, from_s, to_s, share, wanted, f)
    }

    fn cells(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        share: &Share,
        wanted: &[usize],
        mut f: impl FnMut(f64, &[codec::Cell]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        let mut slot_of = vec![usize::MAX; wanted.iter().max().map_or(0, |m| m + 1)];
        for (k, &position) in wanted.iter().enumerate() {
            slot_of[position] = k;
        }
        let mut cells = vec![codec::Cell::Null; wanted.len()];
        self.for_each_encoded_between(id, from_s, to_s, share, |t, _, encoded| {
            codec::cells_into(encoded, &slot_of, &mut cells).map_err(|detail| {
                SessionError::Corrupt {
                    session: id,
                    detail,
                }
            })?;
            f(t, &cells)
        })
    }

    /// The stored clock of a session's first frame (what its seconds count from) and the
    /// range `from_s..=to_s` in that clock, widened by a nanosecond against rounding; `None`
    /// for a session without frames.
    fn range_ns(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
    ) -> Result<Option<RangeNs>, SessionError> {
        // The first frame in recorded order, which the CSV export counts from.
        let origin: Option<i64> = self
            .conn
            .query_row(
                "SELECT elapsed_ns FROM frames WHERE session = ?1 ORDER BY rowid LIMIT 1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
        let origin = match origin {
            Some(o) => Some(o.max(0) as u64),
            None => self
                .conn
                .query_row(
                    "SELECT first_elapsed_ns FROM frame_blocks WHERE session = ?1 ORDER BY rowid LIMIT 1",
                    [id],
                    |r| r.get::<_, i64>(0),
                )
                .optional()?
                .map(|o| o as u64),
        };
        let Some(origin) = origin else {
            return Ok(None);
        };
        let to_ns = |s: f64| {
            if s.is_finite() {
                (origin as f64 + s.max(0.0) * 1e9).clamp(0.0, i64::MAX as f64) as i64
            } else if s > 0.0 {
                i64::MAX
            } else {
                0
            }
        };
        Ok(Some(RangeNs {
            origin,
            lo: to_ns(from_s).saturating_sub(1),
            hi: to_ns(to_s).saturating_add(1),
        }))
    }

    /// Walks the frames in `from_s..=to_s` (see
    /// [`for_each_frame_between`](Self::for_each_frame_between)), or those of one share of
    /// them, with their values still encoded.
    fn for_each_encoded_between(
        &self,
        id: SessionId,
        from_s: f64,
        to_s: f64,
        share: &Share,
        mut f: impl FnMut(f64, usize, &[u8]) -> Result<(), SessionError>,
    ) -> Result<u64, SessionError> {
        self.ensure(id)?;
        let corrupt = |detail: String| SessionError::Corrupt {
            session: id,
            detail,
        };
        let Some(RangeNs { origin, lo, hi }) = self.range_ns(id, from_s, to_s)? else {
            return Ok(0);
        };
        let seconds = |ns: u64| ns.saturating_sub(origin) as f64 / 1e9;
        let mut n = 0u64;
        let mut stmt = self.conn.prepare(
            "SELECT elapsed_ns, source, vals FROM frames WHERE session = ?1 \
             AND elapsed_ns BETWEEN ?2 AND ?3 AND ?4 ORDER BY rowid",
        )?;
        let mut rows = stmt.query(params![id, lo, hi, share.legacy])?;
        while let Some(row) = rows.next()? {
            let t = seconds(row.get::<_, i64>(0)?.max(0) as u64);
            if !(from_s..=to_s).contains(&t) {
                continue;
            }
            let source = row.get::<_, i64>(1)?.max(0) as usize;
            let blob = row
                .get_ref(2)?
                .as_blob()
                .map_err(|e| corrupt(format!("values are not a blob: {e}")))?;
            f(t, source, blob)?;
            n += 1;
        }
        let mut stmt = self.conn.prepare(
            "SELECT first_elapsed_ns, data FROM frame_blocks WHERE session = ?1 \
             AND max_elapsed_ns >= ?2 AND min_elapsed_ns <= ?3 \
             AND rowid BETWEEN ?4 AND ?5 ORDER BY rowid",
        )?;
        let mut rows = stmt.query(params![id, lo, hi, share.blocks.0, share.blocks.1])?;
        while let Some(row) = rows.next()? {
            let first_ns = row.get::<_, i64>(0)? as u64;
            let blob = row
                .get_ref(1)?
                .as_blob()
                .map_err(|e| corrupt(format!("a frame block is not a blob: {e}")))?;
            let mut failed = None;
            codec::for_each_raw_in_block(blob, first_ns, |source, elapsed, encoded| {
                let t = seconds(elapsed);
                if !(from_s..=to_s).contains(&t) {
                    return Ok(std::ops::ControlFlow::Continue(()));
                }
                n += 1;
                Ok(match f(t, source, encoded) {
                    Ok(()) => std::ops::ControlFlow::Continue(()),
                    Err(e) => {
                        failed = Some(e);
                        std::ops::ControlFlow::Break(())
                    }
                })
            })
            .map_err(corrupt)?;
            if let Some(e) = failed {
                return Err(e);
            }
        }
        Ok(n)
    }

    /// The dataset ids of a session's CSV columns, in the same order, with their units.
    pub fn dataset_ids(&self, id: SessionId) -> Result<Vec<(String, String)>, SessionError> {
        let mut stmt = self.conn.prepare(
            "SELECT dataset_id, units FROM datasets WHERE session = ?1 ORDER BY position",
        )?;
        let ids = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<(String, String)>, _>>()?;
        Ok(ids)
    }

    /// Writes a session's frames as CSV, exactly as the live CSV export writes them
    /// (`elapsed_s, Group/Dataset, …`, one row per frame). Returns the rows written.
    pub fn export_csv<W: Write>(&self, id: SessionId, out: W) -> Result<u64, SessionError> {
        self.ensure(id)?;
        let columns = self.columns(id)?;
        let mut csv = CsvWriter::new(out, &columns)?;
        self.for_each_frame(id, |t, _, values| {
            csv.write_row_ns(t.elapsed_ns, values)?;
            Ok(())
        })?;
        csv.flush()?;
        Ok(csv.rows())
    }

    /// [`export_csv`](Self::export_csv) to a file, written beside it first and renamed
    /// into place, so a failed export never leaves half a file under the name.
    pub fn export_csv_file(&self, id: SessionId, path: &Path) -> Result<u64, SessionError> {
        let name = path.file_name().ok_or_else(|| {
            SessionError::Invalid(format!("`{}` is not a file path", path.display()))
        })?;
        let mut partial = name.to_os_string();
        partial.push(".partial");
        let partial = path.with_file_name(partial);
        let result = (|| {
            let file = sextant_fsutil::create_file(&partial)?;
            let rows = self.export_csv(id, std::io::BufWriter::with_capacity(256 * 1024, file))?;
            std::fs::rename(&partial, path)?;
            Ok(rows)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }
}
