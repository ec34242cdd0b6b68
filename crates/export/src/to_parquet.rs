//! A session as one Parquet file: a row per frame, columns `time` (TIMESTAMP in µs, UTC:
//! the session's start plus the time from its first frame), `elapsed_s` (seconds from the
//! first frame, as the CSV export's first column) and one per dataset under its CSV column
//! name.
//!
//! A dataset's column is DOUBLE unless it ever held text that is not a number; then it is
//! UTF-8 text, with numbers written as the CSV writes them, so nothing the device sent is
//! lost to a type. A frame with no new value for a dataset has a null there, as the CSV
//! has an empty cell. Knowing the types takes one pass over the session before the one
//! that writes; both stream, and rows are written in row groups of [`ROW_GROUP`] rows.

use std::io::BufWriter;
use std::sync::Arc;

use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical, ZstdLevel};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use sextant_sessions::{SessionId, SessionStore};
use sextant_telemetry::Value;

use crate::layout::Layout;
use crate::{unique, ExportError, Exported, Stop};

/// Rows a row group holds: about 10 MB of buffers for 16 datasets, and groups large enough
/// for readers to scan fast.
const ROW_GROUP: usize = 64 * 1024;

fn parquet_error(e: parquet::errors::ParquetError) -> ExportError {
    match e {
        // A full disk says so, as every other write does.
        parquet::errors::ParquetError::External(inner) => {
            match inner.downcast::<std::io::Error>() {
                Ok(io) => ExportError::Io(*io),
                Err(other) => ExportError::Parquet(other.to_string()),
            }
        }
        other => ExportError::Parquet(other.to_string()),
    }
}

/// One dataset's values for the row group being filled; `defs` says which rows have one.
enum Buffer {
    Numbers {
        values: Vec<f64>,
        defs: Vec<i16>,
    },
    Texts {
        values: Vec<ByteArray>,
        defs: Vec<i16>,
    },
}

impl Buffer {
    fn push(&mut self, value: &Value, field: &mut String) {
        match self {
            Buffer::Numbers { values, defs } => match value.as_f64() {
                Some(x) => {
                    values.push(x);
                    defs.push(1);
                }
                None => defs.push(0),
            },
            Buffer::Texts { values, defs } => {
                let text: &str = match value {
                    Value::Null => {
                        defs.push(0);
                        return;
                    }
                    Value::Text(t) => t,
                    Value::Number(n) => {
                        sextant_telemetry::csv::write_number(field, *n);
                        field
                    }
                };
                values.push(ByteArray::from(text.as_bytes().to_vec()));
                defs.push(1);
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Buffer::Numbers { values, defs } => {
                values.clear();
                defs.clear();
            }
            Buffer::Texts { values, defs } => {
                values.clear();
                defs.clear();
            }
        }
    }
}

struct Rows {
    time_us: Vec<i64>,
    elapsed_s: Vec<f64>,
    columns: Vec<Buffer>,
}

pub(crate) fn write<W: std::io::Write + Send>(
    store: &SessionStore,
    id: SessionId,
    layout: &Layout,
    file: &mut W,
) -> Result<Exported, ExportError> {
    let summary = store.summary(id)?;
    let start_us = summary.started_unix_ms.saturating_mul(1_000);
    let texts = text_columns(store, id, layout.columns.len())?;

    let mut fields = vec![
        Arc::new(
            Type::primitive_type_builder("time", Physical::INT64)
                .with_repetition(Repetition::REQUIRED)
                .with_logical_type(Some(LogicalType::timestamp(true, TimeUnit::MICROS)))
                .build()
                .map_err(parquet_error)?,
        ),
        Arc::new(
            Type::primitive_type_builder(sextant_telemetry::csv::TIME_COLUMN, Physical::DOUBLE)
                .with_repetition(Repetition::REQUIRED)
                .build()
                .map_err(parquet_error)?,
        ),
    ];
    let mut names: Vec<String> = fields.iter().map(|f| f.name().to_string()).collect();
    for (column, text) in layout.columns.iter().zip(&texts) {
        let name = unique(&column.name, |k| names.iter().any(|n| n == k));
        let field = if *text {
            Type::primitive_type_builder(&name, Physical::BYTE_ARRAY)
                .with_logical_type(Some(LogicalType::String))
        } else {
            Type::primitive_type_builder(&name, Physical::DOUBLE)
        };
        fields.push(Arc::new(
            field
                .with_repetition(Repetition::OPTIONAL)
                .build()
                .map_err(parquet_error)?,
        ));
        names.push(name);
    }
    let schema = Arc::new(
        Type::group_type_builder("sextant_session")
            .with_fields(fields)
            .build()
            .map_err(parquet_error)?,
    );
    let units: serde_json::Map<String, serde_json::Value> = layout
        .columns
        .iter()
        .zip(&names[2..])
        .filter(|(c, _)| !c.units.is_empty())
        .map(|(c, name)| (name.clone(), c.units.clone().into()))
        .collect();
    let session = serde_json::json!({
        "id": id, "title": summary.title, "tags": summary.tags,
        "startedUnixMs": summary.started_unix_ms, "units": units,
    });
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(ROW_GROUP))
        .set_created_by(concat!("sextant ", env!("CARGO_PKG_VERSION")).into())
        .set_key_value_metadata(Some(vec![KeyValue::new(
            "sextant.session".to_string(),
            session.to_string(),
        )]))
        .build();
    let mut out = SerializedFileWriter::new(
        BufWriter::with_capacity(1 << 20, file),
        schema,
        Arc::new(properties),
    )
    .map_err(parquet_error)?;

    let mut rows = Rows {
        time_us: Vec::with_capacity(ROW_GROUP),
        elapsed_s: Vec::with_capacity(ROW_GROUP),
        columns: texts
            .iter()
            .map(|text| {
                let defs = Vec::with_capacity(ROW_GROUP);
                if *text {
                    Buffer::Texts {
                        values: Vec::new(),
                        defs,
                    }
                } else {
                    Buffer::Numbers {
                        values: Vec::with_capacity(ROW_GROUP),
                        defs,
                    }
                }
            })
            .collect(),
    };
    let mut field = String::new();
    let mut origin = None;
    let mut exported = Exported::default();
    let mut stop = Stop::new();
    let walked = store.for_each_frame(id, |t, _, values| {
        let origin = *origin.get_or_insert(t.elapsed_ns);
        let since = t.elapsed_ns.saturating_sub(origin);
        rows.time_us.push(start_us + (since / 1_000) as i64);
        rows.elapsed_s.push(since as f64 / 1e9);
        for (i, buffer) in rows.columns.iter_mut().enumerate() {
            buffer.push(values.get(i).unwrap_or(&Value::Null), &mut field);
        }
        exported.frames += 1;
        if rows.time_us.len() == ROW_GROUP {
            if let Err(e) = row_group(&mut out, &mut rows) {
                return Err(stop.stop(e));
            }
        }
        Ok(())
    });
    stop.result(walked)?;
    if !rows.time_us.is_empty() {
        row_group(&mut out, &mut rows)?;
    }
    out.close().map_err(parquet_error)?;
    Ok(exported)
}

/// Which columns hold text that is not a number somewhere in the session.
fn text_columns(
    store: &SessionStore,
    id: SessionId,
    width: usize,
) -> Result<Vec<bool>, ExportError> {
    let mut texts = vec![false; width];
    store.for_each_frame(id, |_, _, values| {
        for (text, value) in texts.iter_mut().zip(values) {
            if !*text && matches!(value, Value::Text(_)) && value.as_f64().is_none() {
                *text = true;
            }
        }
        Ok(())
    })?;
    Ok(texts)
}

/// Writes the rows held as one row group and empties the buffers.
fn row_group<W: std::io::Write + Send>(
    out: &mut SerializedFileWriter<W>,
    rows: &mut Rows,
) -> Result<(), ExportError> {
    let mut group = out.next_row_group().map_err(parquet_error)?;
    let mut index = 0;
    while let Some(mut column) = group.next_column().map_err(parquet_error)? {
        let written =
            match index {
                0 => column
                    .typed::<Int64Type>()
                    .write_batch(&rows.time_us, None, None),
                1 => column
                    .typed::<DoubleType>()
                    .write_batch(&rows.elapsed_s, None, None),
                k => {
                    match &rows.columns[k - 2] {
                        Buffer::Numbers { values, defs } => column
                            .typed::<DoubleType>()
                            .write_batch(values, Some(defs), None),
                        Buffer::Texts { values, defs } => column
                            .typed::<ByteArrayType>()
                            .write_batch(values, Some(defs), None),
                    }
                }
            };
        written.map_err(parquet_error)?;
        column.close().map_err(parquet_error)?;
        index += 1;
    }
    group.close().map_err(parquet_error)?;
    rows.time_us.clear();
    rows.elapsed_s.clear();
    rows.columns.iter_mut().for_each(Buffer::clear);
    Ok(())
}
