//! Register maps: a CSV list of a device's registers, turned into the register groups to
//! poll and one dataset per register, bound to the parser slot that carries it; and the
//! project source that reads the Modbus chunk layout.
//!
//! # Format
//!
//! One register (or run of registers) per line:
//!
//! ```text
//! name,kind,address,count,scale,units,type
//! Supply temperature,holding,0,1,0.1,°C,i16
//! Pump running,coil,3
//! "Level, tank 2",input,10,1,1,mm
//! ```
//!
//! - `name` – the dataset title. With `count` above 1, datasets are named `name 1`,
//!   `name 2`, … for each address.
//! - `kind` – `holding`, `input`, `coil` or `discrete` (also `hr`, `ir`, `co`, `di`, and
//!   the long forms such as `holding register` or `discrete input`).
//! - `address` – the protocol address, 0 to 65535, decimal or `0x` hex: the number sent on
//!   the wire, so the register documented as 40001 is holding address 0.
//! - `count` – consecutive addresses, each its own dataset; 1 when empty or absent.
//! - `scale` – multiplier applied to the raw value (becomes the dataset's transform);
//!   1 when empty or absent.
//! - `units` – shown next to the value.
//! - `type` – `u16` (the default) or `i16` for registers holding signed values in two's
//!   complement. Coils and discrete inputs are always 0/1.
//!
//! The first line may be a header naming the columns (a line with two or more known column
//! names is taken for one); then they may come in any order, and
//! columns named `description`, `comment` or `notes` are ignored. Without a header the
//! columns are positional as above and only the first three are required. The file is
//! read with the `csv` crate: fields may be quoted with `"` (a doubled `""` is a quote) to
//! hold the separator; a quoted field starts with its quote and ends on its line. A file
//! whose first line has semicolons and no commas is read with `;` as the separator. Blank
//! lines and lines starting with `#` are skipped.
//!
//! Registers of the same kind at adjacent or overlapping addresses are read by one group,
//! so a map never makes the device answer for addresses it did not list. Groups are
//! ordered holding, input, coil, discrete, each by address.

use sextant_telemetry::project::{
    Connection, Dataset, FrameMode, Framing, Group, GroupWidget, ModbusSettings, ParserConfig,
    Project, RegisterGroup, RegisterKind, Source, Transform, TransformLanguage,
};

use super::{kind_name, parse_u16, slot_of};
use crate::csv_replay::record_line;

/// Why a register map could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterMapError {
    #[error("register map line {line}: {message}")]
    Line { line: usize, message: String },
    #[error(
        "the register map lists no registers: add lines such as `Temperature,holding,0,1,0.1,°C`"
    )]
    Empty,
}

const COLUMNS: [&str; 7] = ["name", "kind", "address", "count", "scale", "units", "type"];
const IGNORED_COLUMNS: [&str; 3] = ["description", "comment", "notes"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signedness {
    Unsigned,
    Signed,
}

struct Row {
    line: usize,
    name: String,
    kind: RegisterKind,
    address: u16,
    count: u16,
    scale: f64,
    units: String,
    signedness: Signedness,
}

/// Reads a register map (see the module documentation for the format) into the groups to
/// poll and one dataset per register, with ids `ds-1`, `ds-2`, … and each dataset's
/// `index` set to the slot its register occupies in the chunk layout.
pub fn import_register_map(
    csv_text: &str,
) -> Result<(Vec<RegisterGroup>, Vec<Dataset>), RegisterMapError> {
    let rows = read_rows(csv_text)?;
    if rows.is_empty() {
        return Err(RegisterMapError::Empty);
    }
    let groups = merge_groups(&rows);
    let mut datasets = Vec::new();
    for row in &rows {
        for k in 0..row.count {
            // Rows were checked to stay within the address space.
            let address = row.address.wrapping_add(k);
            let Some(index) = slot_of(&groups, row.kind, address) else {
                return Err(RegisterMapError::Line {
                    line: row.line,
                    message: format!("internal error: no group covers {address}"),
                });
            };
            let title = if row.count == 1 {
                row.name.clone()
            } else {
                format!("{} {}", row.name, k + 1)
            };
            let bits = matches!(row.kind, RegisterKind::Coil | RegisterKind::Discrete);
            datasets.push(Dataset {
                id: format!("ds-{}", datasets.len() + 1),
                title,
                units: row.units.clone(),
                index,
                led: bits,
                transform: transform(row.scale, row.signedness),
                ..Dataset::default()
            });
        }
    }
    Ok((groups, datasets))
}

fn transform(scale: f64, signedness: Signedness) -> Option<Transform> {
    // Reinterprets 32768..65535 as -32768..-1 without a conditional.
    let raw = match signedness {
        Signedness::Unsigned => "value",
        Signedness::Signed => "(value - 65536 * floor(value / 32768))",
    };
    let code = match (signedness, scale == 1.0) {
        (Signedness::Unsigned, true) => return None,
        (Signedness::Signed, true) => raw.to_string(),
        (_, false) => format!("{raw} * {scale}"),
    };
    Some(Transform {
        language: TransformLanguage::Expression,
        code,
    })
}

/// Ranges of the same kind that touch or overlap become one group.
fn merge_groups(rows: &[Row]) -> Vec<RegisterGroup> {
    let mut groups = Vec::new();
    for kind in [
        RegisterKind::Holding,
        RegisterKind::Input,
        RegisterKind::Coil,
        RegisterKind::Discrete,
    ] {
        let mut ranges: Vec<(u32, u32)> = rows
            .iter()
            .filter(|r| r.kind == kind)
            .map(|r| {
                let start = u32::from(r.address);
                (start, start + u32::from(r.count))
            })
            .collect();
        ranges.sort_unstable();
        let mut current: Option<(u32, u32)> = None;
        for (start, end) in ranges {
            current = match current {
                // A group's count is a u16: start another one rather than overflow it.
                Some((s, e)) if start <= e && end - s <= u32::from(u16::MAX) => {
                    Some((s, e.max(end)))
                }
                Some(done) => {
                    groups.push(group(kind, done));
                    Some((start, end))
                }
                None => Some((start, end)),
            };
        }
        if let Some(done) = current {
            groups.push(group(kind, done));
        }
    }
    groups
}

fn group(kind: RegisterKind, (start, end): (u32, u32)) -> RegisterGroup {
    // Ranges come from u16 addresses and are capped at u16::MAX long by the caller.
    RegisterGroup {
        kind,
        start: u16::try_from(start).unwrap_or(u16::MAX),
        count: u16::try_from(end - start).unwrap_or(u16::MAX),
    }
}

fn read_rows(text: &str) -> Result<Vec<Row>, RegisterMapError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(first) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return Ok(Vec::new());
    };
    let separator = if first.contains(';') && !first.contains(',') {
        ';'
    } else {
        ','
    };
    let records = records(text, separator)?;
    let mut records = records.into_iter().peekable();
    // Column positions: by header when there is one, else the documented order.
    let mut columns: Vec<Option<usize>> = (0..COLUMNS.len()).map(Some).collect();
    let mut positional = true;
    if let Some((line, fields)) = records.peek() {
        // A data row has at most a name and units that could pass for column names.
        let known = fields
            .iter()
            .map(|f| f.trim().to_ascii_lowercase())
            .filter(|f| COLUMNS.contains(&f.as_str()) || IGNORED_COLUMNS.contains(&f.as_str()))
            .count();
        if known >= 2 {
            columns = header(fields).map_err(|m| err(*line, m))?;
            positional = false;
            records.next();
        }
    }
    let mut rows = Vec::new();
    for (line, fields) in records {
        let field = |c: usize| -> &str {
            columns[c]
                .and_then(|i| fields.get(i))
                .map_or("", |f| f.trim())
        };
        if positional && fields.len() > COLUMNS.len() {
            return Err(err(
                line,
                format!(
                    "{} fields where at most {} are known ({}); quote a name that contains `{separator}`",
                    fields.len(),
                    COLUMNS.len(),
                    COLUMNS.join(", ")
                ),
            ));
        }
        rows.push(row(line, field).map_err(|m| err(line, m))?);
    }
    Ok(rows)
}

/// The map's records with the line each starts on, read by the `csv` crate (quotes may
/// hold the separator, `""` is a quote); blank lines and `#` comments are left out.
fn records(text: &str, separator: char) -> Result<Vec<(usize, Vec<String>)>, RegisterMapError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .delimiter(separator as u8)
        .from_reader(text.as_bytes());
    let mut records = Vec::new();
    for record in reader.records() {
        let line_of = |p: Option<&csv::Position>| p.map_or(0, |p| record_line(text, p, true));
        let record = record.map_err(|e| err(line_of(e.position()), e.to_string()))?;
        let line = line_of(record.position());
        let fields: Vec<String> = record.iter().map(String::from).collect();
        if fields.iter().all(|f| f.trim().is_empty()) || fields[0].trim_start().starts_with('#') {
            continue; // a line of blanks, or an indented comment
        }
        for f in &fields {
            if f.contains(['\n', '\r']) {
                return Err(err(
                    line,
                    "a quote is not closed: fields may not span lines",
                ));
            }
            if f.trim_start().starts_with('"') {
                return Err(err(
                    line,
                    format!(
                        "`{}` has a quote after a blank: start a quoted field with its quote",
                        f.trim()
                    ),
                ));
            }
        }
        records.push((line, fields));
    }
    Ok(records)
}

fn err(line: usize, message: impl Into<String>) -> RegisterMapError {
    RegisterMapError::Line {
        line,
        message: message.into(),
    }
}

fn header(fields: &[String]) -> Result<Vec<Option<usize>>, String> {
    let mut columns = vec![None; COLUMNS.len()];
    for (i, f) in fields.iter().enumerate() {
        let name = f.trim().to_ascii_lowercase();
        if IGNORED_COLUMNS.contains(&name.as_str()) {
            continue;
        }
        let Some(c) = COLUMNS.iter().position(|known| *known == name) else {
            return Err(format!(
                "unknown column `{}`; the columns are {} (and {} are ignored)",
                f.trim(),
                COLUMNS.join(", "),
                IGNORED_COLUMNS.join(", ")
            ));
        };
        if columns[c].replace(i).is_some() {
            return Err(format!("column `{name}` appears twice"));
        }
    }
    for required in ["name", "kind", "address"] {
        if let Some(c) = COLUMNS.iter().position(|k| *k == required) {
            if columns[c].is_none() {
                return Err(format!("the header has no `{required}` column"));
            }
        }
    }
    Ok(columns)
}

fn row<'a>(line: usize, field: impl Fn(usize) -> &'a str) -> Result<Row, String> {
    let name = field(0).to_string();
    if name.is_empty() {
        return Err("the name is empty: give every register a name".into());
    }
    let kind = parse_kind(field(1))?;
    let address = parse_u16(field(2)).ok_or_else(|| {
        if field(2).is_empty() {
            "the address is missing".to_string()
        } else {
            format!(
                "address `{}` is not a number from 0 to 65535 (use the protocol address: register 40001 is holding 0)",
                field(2)
            )
        }
    })?;
    let count = match field(3) {
        "" => 1,
        c => parse_u16(c)
            .filter(|c| *c > 0)
            .ok_or_else(|| format!("count `{c}` is not a number from 1 to 65535"))?,
    };
    if u32::from(address) + u32::from(count) > 65_536 {
        return Err(format!(
            "address {address} with count {count} runs past address 65535"
        ));
    }
    let scale = match field(4) {
        "" => 1.0,
        s => s
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v != 0.0)
            .ok_or_else(|| format!("scale `{s}` is not a non-zero number such as 0.1"))?,
    };
    let units = field(5).to_string();
    let signedness = match field(6).to_ascii_lowercase().as_str() {
        "" | "u16" | "uint16" | "unsigned" => Signedness::Unsigned,
        "i16" | "int16" | "signed" => Signedness::Signed,
        other => return Err(format!("type `{other}` is not known: use u16 or i16")),
    };
    if signedness == Signedness::Signed
        && matches!(kind, RegisterKind::Coil | RegisterKind::Discrete)
    {
        return Err(format!(
            "type i16 applies to registers, not to a {} (a single bit)",
            kind_name(kind)
        ));
    }
    Ok(Row {
        line,
        name,
        kind,
        address,
        count,
        scale,
        units,
        signedness,
    })
}

fn parse_kind(s: &str) -> Result<RegisterKind, String> {
    let norm: String = s
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c == '_' || c == '-' { ' ' } else { c })
        .collect();
    match norm
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .as_str()
    {
        "holding" | "hr" | "holding register" | "holding registers" => Ok(RegisterKind::Holding),
        "input" | "ir" | "input register" | "input registers" => Ok(RegisterKind::Input),
        "coil" | "co" | "coils" => Ok(RegisterKind::Coil),
        "discrete" | "di" | "discrete input" | "discrete inputs" => Ok(RegisterKind::Discrete),
        "" => Err("the kind is missing: use holding, input, coil or discrete".into()),
        _ => Err(format!(
            "kind `{s}` is not known: use holding, input, coil or discrete"
        )),
    }
}

/// A project source that polls `settings` and reads the Modbus chunk layout: one line per
/// poll, comma-separated, through the built-in delimited parser.
pub fn source(id: &str, title: &str, settings: ModbusSettings) -> Source {
    let values: usize = settings.groups.iter().map(|g| usize::from(g.count)).sum();
    let framing = Framing {
        mode: FrameMode::EndOnly,
        end: vec!["\\n".into()],
        // Five digits and a comma per value; never below the usual limit.
        max_frame_bytes: Framing::default().max_frame_bytes.max(values * 6 + 16),
        ..Framing::default()
    };
    Source {
        id: id.into(),
        title: title.into(),
        connection: Connection::Modbus(settings),
        framing,
        parser: ParserConfig::Delimited {
            separator: ",".into(),
        },
        ..Source::default()
    }
}

/// A whole project for one Modbus device: its [`source`], the register datasets in a data
/// grid and the coils and discrete inputs (datasets with `led` set) in an LED panel.
pub fn project(title: &str, settings: ModbusSettings, datasets: Vec<Dataset>) -> Project {
    let source = source("src-1", title, settings);
    let (bits, registers): (Vec<Dataset>, Vec<Dataset>) = datasets
        .into_iter()
        .map(|d| Dataset {
            source: Some(source.id.clone()),
            ..d
        })
        .partition(|d| d.led);
    let mut groups = Vec::new();
    for (title, widget, datasets) in [
        ("Registers", GroupWidget::DataGrid, registers),
        ("Coils and inputs", GroupWidget::LedPanel, bits),
    ] {
        if !datasets.is_empty() {
            groups.push(Group {
                id: format!("grp-{}", groups.len() + 1),
                title: title.into(),
                widget,
                datasets,
                ..Group::default()
            });
        }
    }
    Project {
        title: title.into(),
        sources: vec![source],
        groups,
        ..Project::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_quotes_comments_and_line_numbers() {
        let text = "a,\"b, c\",\"say \"\"hi\"\"\",,\n\n# note\n  # indented note\n\"x;y\";z\n";
        assert_eq!(
            records(text, ',').unwrap(),
            [
                (
                    1,
                    vec![
                        "a".into(),
                        "b, c".into(),
                        "say \"hi\"".into(),
                        String::new(),
                        String::new()
                    ]
                ),
                (5, vec!["x;y;z".into()]),
            ]
        );
        assert_eq!(
            records("\"x;y\";z\n", ';').unwrap(),
            [(1, vec!["x;y".into(), "z".into()])]
        );
        let message = |text| match records(text, ',') {
            Err(RegisterMapError::Line { line, message }) => (line, message),
            other => panic!("{other:?}"),
        };
        assert_eq!(message("ok,1\n\"open,holding,1\n").0, 2);
        assert!(message("\"open,holding,1\n")
            .1
            .contains("quote is not closed"));
        assert!(message("a, \"b, c\"\n").1.contains("quote after a blank"));
    }

    #[test]
    fn signed_and_scaled_transforms() {
        assert_eq!(transform(1.0, Signedness::Unsigned), None);
        assert_eq!(
            transform(0.1, Signedness::Unsigned).map(|t| t.code),
            Some("value * 0.1".into())
        );
        assert_eq!(
            transform(1.0, Signedness::Signed).map(|t| t.code),
            Some("(value - 65536 * floor(value / 32768))".into())
        );
    }
}
