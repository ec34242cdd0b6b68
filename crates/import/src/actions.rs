//! Actions (buttons that send bytes), shared data tables and the MQTT publisher.
//!
//! A Serial Studio action sends its text with escapes resolved, or its hex bytes, followed
//! by an end-of-line sequence. Sextant has three line endings; any other sequence is folded
//! into the payload so the bytes on the wire stay the same.

use serde_json::{json, Value};
use sextant_telemetry::project::{
    Action, ActionTimer, ConstTable, LineEnding, MqttPublisher, PublishFormat, TableEntry,
    TableValue,
};

use crate::json::{index, show, Obj};
use crate::report::ImportReport;
use crate::text::{hex_text, read_hex, resolve_escapes, simplified};
use crate::Ids;

pub(crate) fn import_actions(
    items: &[Value],
    path: &str,
    sources: &[(i64, String)],
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Vec<Action> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let apath = index(path, i);
        let Some(map) = item.as_object().filter(|m| !m.is_empty()) else {
            r.push(
                apath,
                format!("expected an action object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut obj = Obj::new(map, apath);
        out.push(import_action(&mut obj, sources, ids, r));
        obj.finish(r);
    }
    out
}

fn import_action(
    obj: &mut Obj,
    sources: &[(i64, String)],
    ids: &mut Ids,
    r: &mut ImportReport,
) -> Action {
    let mut a = Action {
        id: ids.next("act"),
        title: simplified(&obj.string("title", r).unwrap_or_default()),
        ..Action::default()
    };
    obj.skip(&["actionId"]);
    a.source = action_source(obj, sources, r);
    action_payload(obj, &mut a, r);
    action_timer(obj, &mut a, r);
    a.on_connect = obj.bool("autoExecuteOnConnect", r).unwrap_or(false);
    obj.unmapped(
        "icon",
        &[json!("Play Property")],
        "Sextant action buttons have no icons",
        r,
    );
    obj.unmapped("txEncoding", &[], "Sextant sends text as UTF-8 only", r);
    obj.unmapped(
        "checksum",
        &[],
        "Sextant actions do not append a checksum",
        r,
    );
    a
}

/// The source an action sends to: named only when the project has several sources, and
/// the first one when `sourceId` names none of them.
fn action_source(obj: &mut Obj, sources: &[(i64, String)], r: &mut ImportReport) -> Option<String> {
    let source_path = obj.at("sourceId");
    let ss_source = obj.i64("sourceId", r).unwrap_or(0);
    if sources.len() <= 1 {
        return None;
    }
    match sources.iter().find(|(id, _)| *id == ss_source) {
        Some((_, id)) => Some(id.clone()),
        None => {
            r.push(
                source_path,
                format!("no source has sourceId {ss_source}; the action sends to the first source"),
            );
            sources.first().map(|(_, id)| id.clone())
        }
    }
}

/// The bytes an action sends (text with escapes resolved, or hex) and its line ending; an
/// end-of-line sequence Sextant has no name for is folded into the payload.
fn action_payload(obj: &mut Obj, a: &mut Action, r: &mut ImportReport) {
    let binary = obj.bool("binary", r).unwrap_or(false);
    let data_path = obj.at("txData");
    let data = obj.string("txData", r).unwrap_or_default();
    let eol_path = obj.at("eol");
    let eol = resolve_escapes(&obj.string("eol", r).unwrap_or_default());
    a.line_ending = match eol.as_slice() {
        b"" => LineEnding::None,
        b"\n" => LineEnding::Lf,
        b"\r" => LineEnding::Cr,
        b"\r\n" => LineEnding::CrLf,
        _ => LineEnding::None,
    };
    let odd_eol = a.line_ending == LineEnding::None && !eol.is_empty();
    if odd_eol {
        r.push(
            eol_path,
            "end-of-line sequence other than LF, CR or CRLF; appended to the payload instead",
        );
    }

    if binary {
        let read = read_hex(&data);
        if read.skipped_junk || read.odd {
            // Serial Studio refuses such data and sends nothing.
            r.push(
                data_path.clone(),
                "hex data with stray characters or an odd digit count; Serial Studio sends \
                 nothing for it, imported as the readable part",
            );
        }
        let mut bytes = read.bytes;
        if odd_eol {
            bytes.extend_from_slice(&eol);
        }
        if bytes.is_empty() {
            r.push(
                data_path,
                "no bytes to send; imported as an empty text action",
            );
        } else {
            a.hex = true;
            a.payload = hex_text(&bytes);
        }
    } else {
        let mut bytes = resolve_escapes(&data);
        if odd_eol {
            bytes.extend_from_slice(&eol);
        }
        a.payload = String::from_utf8_lossy(&bytes).into_owned();
    }
}

/// Serial Studio's timer modes by the names newer files write: 0 off, 1 start on connect,
/// 2 start on click, 3 toggle on click, 4 send N times.
const TIMER_MODES: [(&str, i64); 5] = [
    ("off", 0),
    ("autostart", 1),
    ("startontrigger", 2),
    ("toggleontrigger", 3),
    ("repeatntimes", 4),
];

/// The action's timer: Serial Studio's mode as the matching [`ActionTimer`], with its
/// interval (and, for "send N times", its count).
fn action_timer(obj: &mut Obj, a: &mut Action, r: &mut ImportReport) {
    let mode_path = obj.at("timerMode");
    let mode = match obj.raw("timerMode") {
        Some(Value::String(s)) => {
            let name = s.to_ascii_lowercase();
            TIMER_MODES
                .iter()
                .find(|(n, _)| *n == name)
                .map_or(-1, |(_, m)| *m)
        }
        Some(v) => crate::json::as_number(v).map_or(-1, |f| f as i64),
        None => 0,
    };
    let interval_path = obj.at("timerIntervalMs");
    let interval = obj.i64("timerIntervalMs", r).unwrap_or(100);
    let repeat_path = obj.at("repeatCount");
    let repeat = obj.i64("repeatCount", r);
    let timer = match mode {
        0 => return,
        1 => ActionTimer::WhileConnected,
        2 => ActionTimer::StartOnClick,
        3 => ActionTimer::ToggleOnClick,
        4 => ActionTimer::Repeat,
        _ => {
            r.push(mode_path, "unknown timer mode; no timer");
            return;
        }
    };
    match u64::try_from(interval) {
        Ok(ms) if ms > 0 => {
            if ms < Action::MIN_TIMER_MS {
                r.push(
                    interval_path,
                    format!(
                        "timer interval {ms} ms is below Sextant's shortest, {} ms; it sends \
                         every {} ms",
                        Action::MIN_TIMER_MS,
                        Action::MIN_TIMER_MS
                    ),
                );
            }
            a.timer_ms = Some(ms.max(Action::MIN_TIMER_MS));
            a.timer = timer;
        }
        _ => {
            r.push(
                interval_path,
                format!("timer interval {interval} ms is not valid; no timer"),
            );
            return;
        }
    }
    if timer == ActionTimer::Repeat {
        match repeat.map(u32::try_from) {
            None => a.repeat_count = Some(Action::DEFAULT_REPEAT),
            Some(Ok(n)) if n > 0 => a.repeat_count = Some(n),
            Some(_) => {
                r.push(
                    repeat_path,
                    format!(
                        "a repeat count must be at least 1; it sends {} times",
                        Action::DEFAULT_REPEAT
                    ),
                );
                a.repeat_count = Some(Action::DEFAULT_REPEAT);
            }
        }
    }
}

/// Serial Studio data tables: named registers read with `tableGet`.
pub(crate) fn import_tables(items: &[Value], path: &str, r: &mut ImportReport) -> Vec<ConstTable> {
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let tpath = index(path, i);
        let Some(map) = item.as_object() else {
            r.push(
                tpath,
                format!("expected a table object, found {}; skipped", show(item)),
            );
            continue;
        };
        let mut t = Obj::new(map, tpath.clone());
        let name = simplified(&t.string("name", r).unwrap_or_default());
        let rpath = t.at("registers");
        let registers = t.array("registers", r).map(Vec::as_slice).unwrap_or(&[]);
        let mut table = ConstTable {
            name,
            entries: Vec::new(),
        };
        for (k, reg) in registers.iter().enumerate() {
            let path = index(&rpath, k);
            let Some(map) = reg.as_object() else {
                r.push(
                    path,
                    format!("expected a register, found {}; skipped", show(reg)),
                );
                continue;
            };
            let mut o = Obj::new(map, path.clone());
            let name = simplified(&o.string("name", r).unwrap_or_default());
            let kind = o
                .string("type", r)
                .unwrap_or_else(|| "constant".into())
                .to_ascii_lowercase();
            let value = match o.raw("value") {
                Some(Value::String(s)) => TableValue::Text(s.clone()),
                Some(v) => match crate::json::as_number(v) {
                    Some(n) => TableValue::Number(n),
                    None => {
                        r.push(
                            o.at("value"),
                            format!("{} is not a number or text; using 0", show(v)),
                        );
                        TableValue::Number(0.0)
                    }
                },
                None => TableValue::Number(0.0),
            };
            o.finish(r);
            if name.is_empty() {
                r.push(
                    path,
                    "Serial Studio ignores a register without a name; skipped",
                );
                continue;
            }
            match kind.as_str() {
                "constant" => {}
                "computed" => r.push(
                    path,
                    "computed register: imported with its initial value (scripts update it \
                     with tableSet)",
                ),
                other => {
                    r.push(
                        path,
                        format!("register type {other:?} is not supported; skipped"),
                    );
                    continue;
                }
            }
            table.entries.push(TableEntry { name, value });
        }
        t.finish(r);
        if table.name.is_empty() {
            r.push(
                tpath,
                "Serial Studio ignores a table without a name; skipped",
            );
            continue;
        }
        out.push(table);
    }
    out
}

/// The per-project MQTT publisher, where its settings have a Sextant counterpart.
pub(crate) fn import_publisher(obj: &mut Obj, r: &mut ImportReport) -> Option<MqttPublisher> {
    let mut p = MqttPublisher::default();
    let mut any = false;
    if let Some(e) = obj.bool("enabled", r) {
        p.enabled = e;
        any = true;
    }
    if let Some(h) = obj.string("hostname", r).or_else(|| obj.string("host", r)) {
        if !h.trim().is_empty() {
            p.host = h.trim().to_string();
            any = true;
        }
    }
    if let Some(port) = obj.i64("port", r).and_then(|v| u16::try_from(v).ok()) {
        if port != 0 {
            p.port = port;
            any = true;
        }
    }
    if let Some(t) = obj
        .string("topicBase", r)
        .or_else(|| obj.string("topic", r))
    {
        if !t.trim().is_empty() {
            p.topic = t.trim().to_string();
            any = true;
        }
    }
    if let Some(hz) = obj.i64("publishFrequency", r) {
        p.rate_hz = hz.clamp(1, 30) as u32;
        any = true;
    }
    let mode_path = obj.at("mode");
    match obj.i64("mode", r) {
        None | Some(0) => {}
        Some(1) => p.format = PublishFormat::Raw,
        Some(other) => r.lost(
            mode_path,
            format!("publisher mode {other} (e.g. script-driven) is not supported; publishing JSON frames"),
        ),
    }
    p.client_id = obj.string("clientId", r).unwrap_or_default();
    obj.skip(&["customClientId"]);
    p.username = obj.string("username", r).filter(|u| !u.is_empty());
    if obj
        .raw("password")
        .is_some_and(|v| !crate::json::is_blank(v))
    {
        r.push(
            obj.at("password"),
            "a password is stored in the file; not imported (Sextant keeps secrets in the OS \
             keyring, enter it there)",
        );
    }
    if let Some(tls) = obj.bool("sslEnabled", r) {
        p.tls = tls;
    }
    for key in [
        "mqttVersion",
        "keepAlive",
        "cleanSession",
        "scriptCode",
        "scriptLanguage",
        "scriptTopic",
        "publishNotifications",
        "notificationTopic",
        "sparkplugEnabled",
        "sparkplugGroupId",
        "sparkplugEdgeNodeId",
        "sparkplugDeviceId",
        "sslProtocol",
        "peerVerifyMode",
        "peerVerifyDepth",
    ] {
        obj.unmapped(
            key,
            &[],
            "MQTT publisher option not supported by Sextant",
            r,
        );
    }
    any.then_some(p)
}
