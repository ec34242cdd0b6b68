//! A recorded session as MCAP (<https://mcap.dev>), the log format Foxglove Studio and
//! PlotJuggler open, in the layout of [`crate::mcap_log`].
//!
//! Messages are in time order, a chunk before the frames cut from it: the sources' chunks
//! are merged by time and each written when it falls due. Log times count from the
//! session's start, the clock of the CSV export. The metadata record is `sextant.session`
//! (id, title, tags, start).

use std::collections::BTreeMap;
use std::io::{Seek, Write};

use sextant_sessions::{SessionId, SessionRecords, SessionStore};

use crate::layout::Layout;
use crate::mcap_log::McapLog;
use crate::{ExportError, Exported, Stop};

pub(crate) use crate::mcap_log::MAGIC;

/// A source's raw chunks, read in order and written as they fall due.
struct RawSource {
    index: usize,
    id: String,
    records: SessionRecords,
    next: usize,
}

pub(crate) fn write<W: Write + Seek>(
    store: &SessionStore,
    id: SessionId,
    layout: &Layout,
    file: &mut W,
) -> Result<Exported, ExportError> {
    let detail = store.get(id)?;
    let summary = &detail.summary;
    let start_ns = (summary.started_unix_ms.max(0) as u64).saturating_mul(1_000_000);
    let mut metadata = BTreeMap::new();
    metadata.insert("id".to_string(), id.to_string());
    metadata.insert("title".to_string(), summary.title.clone());
    metadata.insert("tags".to_string(), summary.tags.join(", "));
    metadata.insert(
        "startedUnixMs".to_string(),
        summary.started_unix_ms.to_string(),
    );
    let mut log = McapLog::create(
        file,
        start_ns,
        ("sextant.session", metadata),
        &detail.project,
    )?;
    log.add_groups(&layout.columns, 0)?;
    let mut raws = Vec::new();
    for source in &detail.sources {
        raws.push(RawSource {
            index: source.index,
            id: layout.source_id(source.index),
            records: SessionRecords::open(store.path(), id, source.index)?,
            next: 0,
        });
    }
    let channels: Vec<(usize, String)> = raws.iter().map(|r| (r.index, r.id.clone())).collect();
    log.add_sources(&channels)?;

    let mut exported = Exported::default();
    let mut origin = None;
    let mut stop = Stop::new();
    let walked = store.for_each_frame(id, |t, source, values| {
        let origin = *origin.get_or_insert(t.elapsed_ns);
        let since = t.elapsed_ns.saturating_sub(origin);
        let written = raw_until(&mut log, &mut raws, Some(since)).and_then(|chunks| {
            exported.chunks += chunks;
            log.frame(since, source, values)
        });
        match written {
            Ok(()) => {
                exported.frames += 1;
                Ok(())
            }
            Err(e) => Err(stop.stop(e)),
        }
    });
    stop.result(walked)?;
    exported.chunks += raw_until(&mut log, &mut raws, None)?;
    log.finish()?.flush()?;
    Ok(exported)
}

/// Writes every source's chunks due by `until` ns from the session's first frame (all that
/// are left, with `None`); returns how many.
fn raw_until<W: Write + Seek>(
    log: &mut McapLog<W>,
    raws: &mut [RawSource],
    until: Option<u64>,
) -> Result<u64, ExportError> {
    let mut written = 0;
    // The sources' chunks merged in time order (a session has a handful of sources).
    loop {
        let next = raws
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.records.times().get(r.next).map(|due| (*due, i)))
            .filter(|(due, _)| until.is_none_or(|until| *due <= until))
            .min();
        let Some((due, i)) = next else {
            break;
        };
        let raw = &mut raws[i];
        let (bytes, _) = raw.records.load(raw.next)?;
        raw.next += 1;
        log.raw(raw.index, &raw.id, due, &bytes)?;
        written += 1;
    }
    Ok(written)
}
