//! A session as MCAP (<https://mcap.dev>), the log format Foxglove Studio and PlotJuggler
//! open.
//!
//! - One channel per group, topic `/<group title>`, JSON messages under a JSON Schema: a
//!   frame's `elapsed_s` and each of the group's datasets by title. A dataset with no new
//!   value in the frame is left out of the message, as a plot would not draw a point.
//!   Text stays text; a number that is not finite is `null` (JSON has no NaN).
//! - One channel per source that delivered raw bytes, topic `/<source id>/raw`, each chunk
//!   as `{"data": "<base64>"}` (the schema says `contentEncoding: base64`, which Foxglove
//!   shows as bytes).
//! - Messages are in time order, a chunk before the frames cut from it. Their log time is
//!   the session's start plus the time from its first frame, the clock of the CSV export.
//! - Metadata `sextant.session` (id, title, tags, start) and the project the session was
//!   recorded with as the attachment `project.json`.
//!
//! Chunks are zstd-compressed, the compression every MCAP reader knows.

use std::collections::BTreeMap;
use std::io::{BufWriter, Seek, Write};

use base64::Engine as _;
use mcap::records::MessageHeader;
use mcap::{Attachment, WriteOptions, Writer};
use serde_json::json;
use sextant_sessions::{SessionId, SessionRecords, SessionStore};
use sextant_telemetry::Value;

use crate::layout::Layout;
use crate::{unique, ExportError, Exported, Stop};

/// The first bytes of every MCAP file.
pub(crate) const MAGIC: &[u8] = b"\x89MCAP0\r\n";

fn mcap_error(e: mcap::McapError) -> ExportError {
    match e {
        // A full disk says so, as every other write does.
        mcap::McapError::Io(io) => ExportError::Io(io),
        other => ExportError::Mcap(other.to_string()),
    }
}

/// A group's channel: the columns it carries and the sources whose frames update it.
struct GroupChannel {
    channel: u16,
    /// Column index and the message key (JSON-quoted) of each of the group's datasets.
    keys: Vec<(usize, String)>,
    /// `None`: every frame (a dataset of the group may come from any source).
    sources: Option<Vec<usize>>,
    sequence: u32,
}

/// A source's raw chunks, read in order and written as they fall due.
struct RawChannel {
    channel: u16,
    records: SessionRecords,
    next: usize,
    sequence: u32,
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
    let mut out = WriteOptions::new()
        .compression(Some(mcap::Compression::Zstd))
        .profile("")
        .library(concat!("sextant ", env!("CARGO_PKG_VERSION")))
        .create(BufWriter::with_capacity(1 << 20, file))
        .map_err(mcap_error)?;

    let mut metadata = BTreeMap::new();
    metadata.insert("id".to_string(), id.to_string());
    metadata.insert("title".to_string(), summary.title.clone());
    metadata.insert("tags".to_string(), summary.tags.join(", "));
    metadata.insert(
        "startedUnixMs".to_string(),
        summary.started_unix_ms.to_string(),
    );
    out.write_metadata(&mcap::records::Metadata {
        name: "sextant.session".into(),
        metadata,
    })
    .map_err(mcap_error)?;
    let project = serde_json::to_vec_pretty(&detail.project)
        .map_err(|e| ExportError::Mcap(format!("the session's project: {e}")))?;
    out.attach(&Attachment {
        log_time: start_ns,
        create_time: start_ns,
        name: "project.json".into(),
        media_type: "application/json".into(),
        data: project.into(),
    })
    .map_err(mcap_error)?;

    let mut groups = group_channels(&mut out, layout)?;
    let mut raws = Vec::new();
    let raw_schema = json!({
        "title": "Raw chunk",
        "description": "Bytes as the device delivered them, in one read.",
        "type": "object",
        "properties": {"data": {"type": "string", "contentEncoding": "base64"}},
    });
    let raw_schema = out
        .add_schema(
            "sextant.RawChunk",
            "jsonschema",
            raw_schema.to_string().as_bytes(),
        )
        .map_err(mcap_error)?;
    for source in &detail.sources {
        let records = SessionRecords::open(store.path(), id, source.index)?;
        let topic = format!("/{}/raw", layout.source_id(source.index));
        let channel = out
            .add_channel(raw_schema, &topic, "json", &BTreeMap::new())
            .map_err(mcap_error)?;
        raws.push(RawChannel {
            channel,
            records,
            next: 0,
            sequence: 0,
        });
    }

    let mut exported = Exported::default();
    let mut message = Vec::with_capacity(1024);
    let mut base64 = String::new();
    let mut origin = None;
    let mut stop = Stop::new();
    let walked = store.for_each_frame(id, |t, source, values| {
        let origin = *origin.get_or_insert(t.elapsed_ns);
        let since = t.elapsed_ns.saturating_sub(origin);
        let written = raw_until(
            &mut out,
            &mut raws,
            Some(since),
            start_ns,
            &mut base64,
            &mut message,
        )
        .and_then(|chunks| {
            exported.chunks += chunks;
            for group in groups.iter_mut() {
                if group.sources.as_ref().is_some_and(|s| !s.contains(&source)) {
                    continue;
                }
                group_message(&mut message, since, &group.keys, values);
                group.sequence += 1;
                let header = MessageHeader {
                    channel_id: group.channel,
                    sequence: group.sequence,
                    log_time: start_ns + since,
                    publish_time: start_ns + since,
                };
                out.write_to_known_channel(&header, &message)
                    .map_err(mcap_error)?;
            }
            Ok(())
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
    exported.chunks += raw_until(
        &mut out,
        &mut raws,
        None,
        start_ns,
        &mut base64,
        &mut message,
    )?;
    out.finish().map_err(mcap_error)?;
    let mut buffered = out.into_inner();
    std::io::Write::flush(&mut buffered)?;
    Ok(exported)
}

/// A channel for each group, in the order of the session's columns.
fn group_channels<W: std::io::Write + std::io::Seek>(
    out: &mut Writer<W>,
    layout: &Layout,
) -> Result<Vec<GroupChannel>, ExportError> {
    // Groups in the order their first column appears; a group's datasets in column order.
    let mut order: Vec<&str> = Vec::new();
    for c in &layout.columns {
        if !order.contains(&c.group.as_str()) {
            order.push(&c.group);
        }
    }
    let mut topics: Vec<String> = Vec::new();
    let mut channels = Vec::new();
    for group in order {
        let mut properties = serde_json::Map::new();
        properties.insert(
            "elapsed_s".into(),
            json!({"type": "number", "description": "Seconds from the session's first frame"}),
        );
        let mut keys = Vec::new();
        let mut sources = Some(Vec::new());
        for (i, c) in layout
            .columns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.group == group)
        {
            let key = unique(&c.title, |k| properties.contains_key(k));
            let mut property = json!({"type": ["number", "string", "null"], "title": c.title});
            if !c.units.is_empty() {
                property["description"] = json!(c.units);
            }
            properties.insert(key.clone(), property);
            keys.push((i, serde_json::to_string(&key).unwrap_or_default()));
            match (c.source, &mut sources) {
                (Some(s), Some(list)) if !list.contains(&s) => list.push(s),
                (Some(_), _) => {}
                (None, _) => sources = None,
            }
        }
        let title = if group.is_empty() { "Datasets" } else { group };
        let schema = json!({"title": title, "type": "object", "properties": properties});
        let schema_id = out
            .add_schema(
                &format!("sextant.Group.{title}"),
                "jsonschema",
                schema.to_string().as_bytes(),
            )
            .map_err(mcap_error)?;
        let topic = unique(&format!("/{title}"), |t| topics.iter().any(|x| x == t));
        topics.push(topic.clone());
        let channel = out
            .add_channel(schema_id, &topic, "json", &BTreeMap::new())
            .map_err(mcap_error)?;
        channels.push(GroupChannel {
            channel,
            keys,
            sources,
            sequence: 0,
        });
    }
    Ok(channels)
}

/// A group's message for one frame: `{"elapsed_s": …, "<title>": value, …}`.
fn group_message(out: &mut Vec<u8>, since_ns: u64, keys: &[(usize, String)], values: &[Value]) {
    let mut number = ryu::Buffer::new();
    out.clear();
    out.extend_from_slice(b"{\"elapsed_s\":");
    out.extend_from_slice(number.format(since_ns as f64 / 1e9).as_bytes());
    for (column, key) in keys {
        let value = match values.get(*column) {
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        out.push(b',');
        out.extend_from_slice(key.as_bytes());
        out.push(b':');
        match value {
            Value::Number(n) if n.is_finite() => {
                out.extend_from_slice(number.format_finite(*n).as_bytes())
            }
            Value::Number(_) => out.extend_from_slice(b"null"),
            // Writing to memory cannot fail.
            Value::Text(t) => {
                let _ = serde_json::to_writer(&mut *out, t);
            }
            Value::Null => {}
        }
    }
    out.push(b'}');
}

/// Writes every source's chunks due by `until` ns from the session's first frame (all that
/// are left, with `None`); returns how many.
fn raw_until<W: std::io::Write + std::io::Seek>(
    out: &mut Writer<W>,
    raws: &mut [RawChannel],
    until: Option<u64>,
    start_ns: u64,
    base64: &mut String,
    message: &mut Vec<u8>,
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
        base64.clear();
        base64::engine::general_purpose::STANDARD.encode_string(&bytes, base64);
        message.clear();
        message.extend_from_slice(b"{\"data\":\"");
        message.extend_from_slice(base64.as_bytes());
        message.extend_from_slice(b"\"}");
        raw.sequence += 1;
        let header = MessageHeader {
            channel_id: raw.channel,
            sequence: raw.sequence,
            log_time: start_ns + due,
            publish_time: start_ns + due,
        };
        out.write_to_known_channel(&header, message)
            .map_err(mcap_error)?;
        written += 1;
    }
    Ok(written)
}
