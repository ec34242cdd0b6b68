//! Inputs that are not projects, or are broken ones: the importer answers with an error or
//! a report, never a panic, and whatever it returns still validates.

use std::path::Path;

use serde_json::{json, Value};
use sextant_import::{import_serial_studio, ImportError};
use sextant_telemetry::project::Project;

fn assert_valid(text: &str) -> Option<sextant_import::Imported> {
    match import_serial_studio(text) {
        Ok(imported) => {
            let issues = imported.project.validate();
            assert!(
                issues.is_empty(),
                "import of {text:.200} does not validate: {issues:?}"
            );
            // And it survives the trip through the project file format.
            let reloaded = Project::from_json_str(&imported.project.to_json_string())
                .unwrap_or_else(|e| panic!("reload of {text:.200}: {e}"));
            assert_eq!(reloaded, imported.project);
            Some(imported)
        }
        Err(_) => None,
    }
}

#[test]
fn text_that_is_not_json_is_a_syntax_error_with_a_position() {
    for (text, line) in [
        ("{ \"title\": ", 1),
        ("{\n  \"groups\": [\n    {,\n  ]\n}", 3),
        ("not json at all", 1),
        ("", 1),
        ("{\"a\": 1} trailing", 1),
    ] {
        match import_serial_studio(text) {
            Err(ImportError::Syntax {
                line: l,
                column,
                message,
            }) => {
                assert_eq!(l, line, "{text:?}: {message}");
                assert!(column >= 1 || text.is_empty(), "{text:?}");
            }
            other => panic!("{text:?}: expected a syntax error, got {other:?}"),
        }
    }
    let err = import_serial_studio("{ \"title\": ")
        .unwrap_err()
        .to_string();
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn json_that_is_not_a_serial_studio_project_is_refused_clearly() {
    for (text, hint) in [
        ("[1, 2, 3]", "array"),
        ("{}", "none of the keys"),
        ("null", "null"),
        ("42", "number"),
        ("\"groups\"", "string"),
        (
            "{\"name\": \"package\", \"version\": \"1.0.0\"}",
            "none of the keys",
        ),
    ] {
        match import_serial_studio(text) {
            Err(e @ ImportError::NotSerialStudio { .. }) => {
                let msg = e.to_string();
                assert!(msg.starts_with("not a Serial Studio project"), "{msg}");
                assert!(msg.contains(hint), "{text}: {msg}");
            }
            other => panic!("{text}: expected NotSerialStudio, got {other:?}"),
        }
    }
}

#[test]
fn a_sextant_project_is_recognised() {
    let mut project = Project::default();
    project.sources.push(Default::default());
    let err = import_serial_studio(&project.to_json_string()).unwrap_err();
    assert!(
        err.to_string().contains("already a Sextant project"),
        "{err}"
    );
    // Written by hand without the marker: told what to add, not to "open it directly".
    let unmarked = serde_json::json!({
        "title": "Rig",
        "sources": [{"id": "sim", "connection": {"type": "simulator"}}],
    });
    let err = import_serial_studio(&unmarked.to_string()).unwrap_err();
    assert!(
        err.to_string()
            .contains("add `\"format\": \"sextant-project\", \"schemaVersion\": 1`"),
        "{err}"
    );
}

#[test]
fn a_byte_order_mark_is_accepted() {
    let text = "\u{feff}{\"title\": \"T\", \"groups\": []}";
    let imported = assert_valid(text).expect("imports");
    assert_eq!(imported.project.title, "T");
}

#[test]
fn wrong_types_are_reported_not_fatal() {
    let doc = json!({
        "title": ["not", "text"],
        "groups": 5,
        "actions": {"a": 1},
        "sources": "serial",
        "frameStart": 7,
        "frameEnd": true,
        "frameDetection": "one",
        "decoder": [],
        "tables": "none",
        "mqttPublisher": 3
    });
    let imported = assert_valid(&doc.to_string()).expect("imports");
    let r = &imported.report;
    for path in [
        "title",
        "groups",
        "actions",
        "sources",
        "frameEnd",
        "frameDetection",
        "decoder",
        "tables",
        "mqttPublisher",
    ] {
        assert!(r.mentions(path), "report misses {path}:\n{r}");
    }
    // A number where text is expected keeps its text.
    assert_eq!(imported.project.sources[0].framing.start, "7");
}

#[test]
fn broken_groups_and_datasets_import_what_they_can() {
    let doc = json!({
        "title": "Broken",
        "frameEnd": "\\n",
        "frameDetection": 0,
        "frameParser": "function parse(frame) { return frame.split(','); }",
        "groups": [
            7,
            {"title": "", "datasets": [{"index": 1}]},
            {"title": "No datasets", "datasets": []},
            {"title": "G", "widget": 12, "sourceId": 99, "datasets": [
                {"index": "3", "min": "a", "max": null, "alarmBands": "x", "widget": 5,
                 "graph": "yes", "transformCode": 12, "xAxis": 1e300},
                7,
                [],
                {},
                {"index": -4, "title": "Negative"},
                {"index": 1e300, "title": "Huge"},
                {"index": 4294967296i64, "title": "Wide"},
                {"title": "Virtual without code", "virtual": true},
                {"title": "Expression", "transformCode": "v * 2", "transformLanguage": 2, "index": 2},
                {"title": "Bands", "index": 5, "alarmBands": [
                    {"min": 10, "max": 1, "severity": 9},
                    {"min": 5, "max": 5},
                    "nope",
                    {"min": -1e308, "max": 1e308, "severity": -3, "label": 4}
                ]},
                {"title": "Old alarm", "index": 6, "alarmEnabled": true, "alarmLow": 1e308, "alarmHigh": -1e308},
                {"title": "Inverted", "index": 7, "min": 10, "max": -10, "fftSamples": 1e20}
            ]}
        ]
    });
    let imported = assert_valid(&doc.to_string()).expect("imports");
    let p = &imported.project;
    assert_eq!(p.groups.len(), 1, "only the usable group survives");
    let titles: Vec<&str> = p.datasets().map(|d| d.title.as_str()).collect();
    assert!(titles.contains(&"Negative") && titles.contains(&"Huge") && titles.contains(&"Wide"));
    // Datasets Serial Studio would never fill read a slot no parser field reaches.
    let negative = p
        .datasets()
        .find(|d| d.title == "Negative")
        .expect("dataset");
    assert!(negative.index > 7, "{}", negative.index);
    let inverted = p
        .datasets()
        .find(|d| d.title == "Inverted")
        .expect("dataset");
    assert_eq!((inverted.min, inverted.max), (Some(-10.0), Some(10.0)));
    let r = imported.report.to_string();
    for needle in [
        "groups[0]",
        "groups[1]",
        "groups[2]",
        "groups[3].sourceId",
        "groups[3].widget",
    ] {
        assert!(r.contains(needle), "report misses {needle}:\n{r}");
    }
}

#[test]
fn extreme_settings_do_not_escape_their_ranges() {
    let doc = json!({
        "title": "Extremes",
        "schemaVersion": 99,
        "sources": [
            {"sourceId": 9223372036854775807i64, "busType": 0, "connection": {"baudRate": 1e12, "parityIndex": 99, "dataBitsIndex": -1}},
            {"sourceId": -9223372036854775807i64, "busType": 1, "connection": {"socketTypeIndex": 3, "tcpPort": 70000}},
            {"sourceId": 2, "busType": 4, "connection": {"slaveAddress": 300, "pollInterval": 1, "registerGroups": [{"type": 9, "start": -1, "count": 1e9}, 5]}},
            {"sourceId": 3, "busType": 5, "connection": {"bitrate": 3, "dataBitrate": -1}},
            {"sourceId": 4, "busType": 9, "connection": {"mqttVersion": 77, "keepAlive": 1e9, "port": -1}},
            {"sourceId": 5, "busType": 42, "connection": {"anything": 1}},
            {"sourceId": 6, "busType": 8, "connection": {"mode": 1}},
            {"sourceId": 7, "busType": 2},
            {"sourceId": 8, "frameParserLanguage": 2, "frameParserTemplate": "fixed_width", "frameParserParams": {"widths": "a,0,-3"}},
            {"sourceId": 9, "frameParserLanguage": 7, "decoderMethod": 99, "frameDetection": 12, "checksumAlgorithm": "CRC-8"},
            {"sourceId": 10, "hexadecimalDelimiters": true, "frameStart": "zz", "frameEnd": "A", "frameDetection": 1},
            {"sourceId": 11, "frameDetection": 3, "frameStart": ""}
        ],
        "groups": [{"title": "G", "sourceId": 9223372036854775807i64, "datasets": [{"index": 1, "xAxis": 12}]}],
        "actions": [
            {"title": "a", "binary": true, "txData": "xyz", "timerMode": 9, "timerIntervalMs": -5},
            {"title": "b", "binary": true, "txData": "0x01 0x2", "eol": "\\0", "timerMode": "toggleOnTrigger"},
            {"title": "c", "eol": "\\r\\n\\r", "timerMode": 1, "timerIntervalMs": 0, "sourceId": 1234}
        ]
    });
    let imported = assert_valid(&doc.to_string()).expect("imports");
    assert_eq!(imported.project.sources.len(), 12);
    assert!(imported.report.mentions("schemaVersion"));
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let deep = format!("{{\"groups\": {}{}}}", "[".repeat(5000), "]".repeat(5000));
    assert!(import_serial_studio(&deep).is_err());
}

/// xorshift64*: a small deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn random_value(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(false),
        3 => json!(rng.next() as i64),
        4 => json!(-1),
        5 => json!(0),
        6 => json!(1e308),
        7 => json!(-0.5),
        8 => json!("\\x\\n\\"),
        9 => json!("AA 55 0"),
        10 => json!([1, "two", null]),
        _ => json!({"title": "", "index": 0}),
    }
}

/// Replaces one random node of `value`, or drops one key or element.
fn mutate(node: &mut Value, rng: &mut Rng) {
    let descend = rng.below(4) != 0;
    match node {
        Value::Object(map) if descend && !map.is_empty() => {
            let key = map
                .keys()
                .nth(rng.below(map.len()))
                .cloned()
                .unwrap_or_default();
            if rng.below(10) == 0 {
                map.remove(&key);
            } else if let Some(child) = map.get_mut(&key) {
                mutate(child, rng);
            }
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.below(items.len());
            if rng.below(10) == 0 {
                items.remove(i);
            } else if let Some(child) = items.get_mut(i) {
                mutate(child, rng);
            }
        }
        _ => *node = random_value(rng),
    }
}

#[test]
fn mutated_fixtures_never_panic_and_always_validate() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    // The example shapes too: their tabs' widget references get mutated like the rest.
    let mut files: Vec<_> = ["serial-studio", "serial-studio-shapes"]
        .iter()
        .flat_map(|d| std::fs::read_dir(fixtures.join(d)).expect("fixtures"))
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let n = p.to_string_lossy();
            n.ends_with(".ssproj") || (n.ends_with(".json") && !n.ends_with(".expected.json"))
        })
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        let original: Value = serde_json::from_str(&text).expect("fixture is JSON");
        for _ in 0..400 {
            let mut doc = original.clone();
            for _ in 0..=rng.below(6) {
                mutate(&mut doc, &mut rng);
            }
            assert_valid(&doc.to_string());
        }
        // Truncated and byte-flipped text.
        let bytes = text.as_bytes();
        for cut in (0..bytes.len()).step_by(97) {
            let _ = import_serial_studio(&String::from_utf8_lossy(&bytes[..cut]));
        }
        for _ in 0..200 {
            let mut b = bytes.to_vec();
            let i = rng.below(b.len());
            b[i] = (rng.next() & 0x7F) as u8;
            assert_valid(&String::from_utf8_lossy(&b));
        }
    }
}
