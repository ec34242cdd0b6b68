//! The Serial Studio fixtures: each imports, validates, survives a save/load round trip,
//! maps the settings it was written to exercise, and reports what it deliberately holds
//! that Sextant cannot represent.

use std::path::{Path, PathBuf};

use sextant_import::{import_serial_studio, Imported};
use sextant_telemetry::project::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/serial-studio")
}

/// Every project file in the fixture folder (`.ssproj`, and `.json` other than expectations).
fn project_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .expect("fixture folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".ssproj")
                || (name.ends_with(".json") && !name.ends_with(".expected.json"))
        })
        .collect();
    files.sort();
    files
}

fn import(name: &str) -> Imported {
    let text = std::fs::read_to_string(fixtures().join(name)).expect("fixture");
    import_serial_studio(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn dataset<'a>(p: &'a Project, title: &str) -> &'a Dataset {
    p.datasets()
        .find(|d| d.title == title)
        .unwrap_or_else(|| panic!("no dataset {title}"))
}

fn group<'a>(p: &'a Project, title: &str) -> &'a Group {
    p.groups
        .iter()
        .find(|g| g.title == title)
        .unwrap_or_else(|| panic!("no group {title}"))
}

fn script(p: &ParserConfig) -> (ScriptLanguage, &str) {
    match p {
        ParserConfig::Script { language, code } => (*language, code.as_str()),
        other => panic!("expected a script parser, got {other:?}"),
    }
}

#[test]
fn every_fixture_imports_validates_and_round_trips() {
    let files = project_files();
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name().and_then(|n| n.to_str()).map(String::from))
        .collect();
    for required in [
        "js-csv.ssproj",
        "lua-kv.ssproj",
        "binary-crc.ssproj",
        "multi-source.ssproj",
        "legacy.json",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "missing fixture {required}"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for file in files {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        let imported = import(&name);
        let issues = imported.project.validate();
        assert!(issues.is_empty(), "{name} does not validate: {issues:?}");
        assert!(
            !imported.report.to_string().contains("does not validate"),
            "{name}: {}",
            imported.report
        );

        // Every capture the fixture promises exists.
        let stem = name.rsplit_once('.').map(|(s, _)| s).unwrap_or_default();
        assert!(
            fixtures().join(format!("{stem}.expected.json")).exists(),
            "{name}: expected file"
        );
        if imported.project.sources.len() == 1 {
            assert!(
                fixtures().join(format!("{stem}.capture")).exists(),
                "{name}: capture"
            );
        } else {
            for s in &imported.project.sources {
                assert!(
                    fixtures().join(format!("{stem}.{}.capture", s.id)).exists(),
                    "{name}: capture for {}",
                    s.id
                );
            }
        }

        let path = dir.path().join(format!("{stem}.sextant.json"));
        imported.project.save(&path).expect("save");
        let loaded = Project::load(&path).unwrap_or_else(|e| panic!("{name}: reload: {e}"));
        assert_eq!(
            loaded, imported.project,
            "{name}: save/load changed the project"
        );
    }
}

#[test]
fn js_csv_maps_its_settings() {
    let Imported {
        project: p, report, ..
    } = import("js-csv.ssproj");
    assert_eq!(p.title, "Rover Telemetry");
    assert_eq!(p.sources.len(), 1);
    let s = &p.sources[0];
    assert_eq!((s.id.as_str(), s.title.as_str()), ("src-1", "Rover"));
    match &s.connection {
        Connection::Serial(c) => {
            assert_eq!(c.port, "/dev/ttyUSB0");
            assert_eq!(c.baud, 115_200);
            assert_eq!(c.data_bits, 8);
            assert_eq!(c.parity, Parity::None);
            assert!(c.dtr && c.auto_reconnect);
        }
        other => panic!("serial expected, got {other:?}"),
    }
    assert_eq!(s.framing.mode, FrameMode::StartEnd);
    assert_eq!(s.framing.delimiter_format, DelimiterFormat::Text);
    assert_eq!(s.framing.start, "$");
    // Stored escaped in the file.
    assert_eq!(s.framing.end, vec!["\\n".to_string()]);
    assert_eq!(s.framing.checksum, ChecksumKind::None);
    assert_eq!(s.decoder, Decoder::PlainText);
    let (lang, code) = script(&s.parser);
    assert_eq!(lang, ScriptLanguage::JavaScript);
    assert!(code.contains("frame.split(\",\")"));

    let env = group(&p, "Environment");
    assert_eq!(env.widget, GroupWidget::DataGrid);
    let t = dataset(&p, "Temperature");
    assert_eq!(
        (t.index, t.widget, t.graph),
        (1, DatasetWidget::Gauge, true)
    );
    assert_eq!((t.min, t.max), (Some(-40.0), Some(85.0)));
    assert_eq!(t.units, "°C");
    let tr = t.transform.as_ref().expect("transform");
    assert_eq!(tr.language, TransformLanguage::JavaScript);
    assert!(tr.code.contains("value / 10"));
    assert!(!t.is_virtual);
    assert_eq!(
        t.alarms,
        vec![AlarmBand {
            min: 60.0,
            max: 85.0,
            severity: Severity::Critical,
            label: "Overheat".into()
        }]
    );
    assert_eq!(dataset(&p, "Humidity").widget, DatasetWidget::Bar);
    let b = dataset(&p, "Battery");
    assert!(b.led && !b.graph);
    assert_eq!(b.led_threshold, Some(3.3));
    // alarmEnabled/alarmLow against the widget range 3.0–4.2.
    assert_eq!(b.alarms.len(), 1);
    assert_eq!((b.alarms[0].min, b.alarms[0].max), (3.0, 3.4));
    assert_eq!(b.alarms[0].severity, Severity::Warning);

    assert_eq!(group(&p, "Position").widget, GroupWidget::Gps);
    assert_eq!(dataset(&p, "Latitude").role, Some(Role::Lat));
    assert_eq!(dataset(&p, "Longitude").role, Some(Role::Lon));
    assert_eq!(dataset(&p, "Altitude").role, Some(Role::Alt));

    assert_eq!(group(&p, "Acceleration").widget, GroupWidget::MultiPlot);
    let ax = dataset(&p, "Accel X");
    assert_eq!(
        (ax.role, ax.fft, ax.fft_samples),
        (Some(Role::X), true, 512)
    );
    // xAxis 7 is Accel X's unique id: an XY plot.
    assert_eq!(
        dataset(&p, "Accel Z").x_axis,
        XAxis::Dataset { id: ax.id.clone() }
    );
    assert_eq!(dataset(&p, "Accel Y").x_axis, XAxis::Time);

    assert_eq!(group(&p, "Custom Dial").widget, GroupWidget::Painter);

    // Ids are sequential and stable.
    let ids: Vec<&str> = p.datasets().map(|d| d.id.as_str()).collect();
    assert_eq!(
        ids,
        ["ds-1", "ds-2", "ds-3", "ds-4", "ds-5", "ds-6", "ds-7", "ds-8", "ds-9"]
    );
    let gids: Vec<&str> = p.groups.iter().map(|g| g.id.as_str()).collect();
    assert_eq!(gids, ["grp-1", "grp-2", "grp-3", "grp-4"]);

    assert_eq!(p.actions.len(), 2);
    let reset = &p.actions[0];
    assert_eq!(
        (reset.id.as_str(), reset.title.as_str()),
        ("act-1", "Reset odometer")
    );
    assert_eq!(
        (reset.payload.as_str(), reset.hex, reset.line_ending),
        ("RST ODO", false, LineEnding::CrLf)
    );
    assert_eq!(reset.timer_ms, None);
    let ping = &p.actions[1];
    assert_eq!(
        (ping.line_ending, ping.timer_ms, ping.on_connect),
        (LineEnding::Lf, Some(1000), true)
    );

    // Its painter runs as written.
    assert_eq!(
        p.groups[3].widget,
        sextant_telemetry::project::GroupWidget::Painter
    );
    assert!(p.groups[3]
        .painter_code
        .contains("function paint(ctx, w, h)"));
    // What it deliberately holds that Sextant cannot take.
    assert!(report.mentions("roverNotes"), "{report}");
    assert!(
        report.mentions("groups[2].datasets[0].fftSamplingRate"),
        "{report}"
    );
    assert_eq!(report.len(), 2, "unexpected report items:\n{report}");
}

#[test]
fn lua_kv_maps_its_settings() {
    let Imported {
        project: p, report, ..
    } = import("lua-kv.ssproj");
    let s = &p.sources[0];
    match &s.connection {
        Connection::Mqtt(m) => {
            assert_eq!((m.host.as_str(), m.port), ("broker.example.net", 1883));
            assert_eq!(m.topic, "weather/+/report");
            assert_eq!(m.client_id, "ws-dashboard-7");
            assert_eq!(m.username.as_deref(), Some("dashboard"));
            assert_eq!(m.version, MqttVersion::V311);
            assert_eq!((m.keep_alive_s, m.clean_session, m.tls), (60, true, false));
        }
        other => panic!("mqtt expected, got {other:?}"),
    }
    // The file stores the end delimiter as a literal newline; it means the same as "\\n".
    assert_eq!(s.framing.mode, FrameMode::EndOnly);
    assert_eq!(s.framing.end, vec!["\\n".to_string()]);
    let (lang, code) = script(&s.parser);
    assert_eq!(lang, ScriptLanguage::Lua);
    assert!(code.contains("string.gmatch"));

    let wind = dataset(&p, "Wind Speed");
    let t = wind.transform.as_ref().expect("transform");
    assert_eq!(t.language, TransformLanguage::Lua);
    assert!(!wind.is_virtual);
    assert_eq!(dataset(&p, "Wind Direction").widget, DatasetWidget::Compass);
    assert_eq!(dataset(&p, "Pressure").widget, DatasetWidget::Bar);

    // A transform that never reads `value` computes the dataset from elsewhere.
    let reports = dataset(&p, "Reports Received");
    assert!(reports.is_virtual);
    // No transformLanguage: the source parser's language.
    assert_eq!(
        reports.transform.as_ref().map(|t| t.language),
        Some(TransformLanguage::Lua)
    );

    let rh = dataset(&p, "Relative Humidity");
    assert_eq!(rh.alarms.len(), 2);
    assert_eq!(
        (rh.alarms[0].severity, rh.alarms[0].label.as_str()),
        (Severity::Warning, "Dry")
    );
    assert_eq!(rh.alarms[1].severity, Severity::Info);

    assert_eq!(p.tables.len(), 1);
    assert_eq!(p.tables[0].name, "station");
    assert_eq!(
        p.tables[0].entries,
        vec![TableEntry {
            name: "reports".into(),
            value: TableValue::Number(0.0)
        }]
    );

    assert!(
        report.mentions("sources[0].connection.password"),
        "{report}"
    );
    assert!(
        !report.to_string().contains("not-a-real-secret"),
        "the report leaks the password"
    );
    assert!(
        !p.to_json_string().contains("not-a-real-secret"),
        "the project stores the password"
    );
    assert!(
        report.mentions("groups[0].datasets[2].alarmBands[1].severity"),
        "{report}"
    );
    assert!(report.mentions("tables[0].registers[0]"), "{report}");
}

#[test]
fn binary_crc_maps_its_settings() {
    let Imported {
        project: p, report, ..
    } = import("binary-crc.ssproj");
    let s = &p.sources[0];
    match &s.connection {
        Connection::Udp {
            local_port,
            remote_host,
            remote_port,
            multicast_group,
            multicast_interface,
        } => {
            assert_eq!(*multicast_interface, None);
            assert_eq!(*local_port, 5005);
            assert_eq!(
                (remote_host, remote_port, multicast_group),
                (&None, &None, &None)
            );
        }
        other => panic!("udp expected, got {other:?}"),
    }
    assert_eq!(s.framing.mode, FrameMode::StartEnd);
    assert_eq!(s.framing.delimiter_format, DelimiterFormat::Hex);
    assert_eq!(s.framing.start, "AA 55");
    assert_eq!(s.framing.end, vec!["0D 0A".to_string()]);
    assert_eq!(s.framing.checksum, ChecksumKind::Crc32);
    assert_eq!(s.decoder, Decoder::Binary);
    let (lang, code) = script(&s.parser);
    assert_eq!(lang, ScriptLanguage::JavaScript);
    assert!(code.contains("function parse(frame)"));

    // A JavaScript parser with a Lua transform.
    let pressure = dataset(&p, "Pressure");
    assert_eq!(
        pressure.transform.as_ref().map(|t| t.language),
        Some(TransformLanguage::Lua)
    );
    let fault = dataset(&p, "Fault");
    assert_eq!(
        (fault.index, fault.led, fault.led_threshold),
        (6, true, Some(1.0))
    );

    assert_eq!(group(&p, "Attitude").widget, GroupWidget::Gyroscope);
    assert_eq!(dataset(&p, "Roll").role, Some(Role::Roll));
    assert_eq!(dataset(&p, "Pitch").role, Some(Role::Pitch));
    assert_eq!(dataset(&p, "Heading").role, Some(Role::Yaw));

    let action = &p.actions[0];
    assert_eq!((action.hex, action.payload.as_str()), (true, "A5 01 00"));
    assert_eq!(action.line_ending, LineEnding::None);
    assert!(report.is_empty(), "{report}");
}

#[test]
fn multi_source_binds_datasets_to_their_sources() {
    let Imported {
        project: p, report, ..
    } = import("multi-source.ssproj");
    let ids: Vec<&str> = p.sources.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["src-1", "src-2"]);

    let engine = &p.sources[0];
    match &engine.connection {
        Connection::Serial(c) => {
            assert_eq!(
                (c.port.as_str(), c.baud, c.dtr),
                ("/dev/ttyACM0", 57_600, false)
            );
        }
        other => panic!("serial expected, got {other:?}"),
    }
    assert_eq!(engine.framing.mode, FrameMode::EndOnly);
    assert_eq!(engine.framing.end, vec!["\\r\\n".to_string()]);
    // Serial Studio's "CRC-16" is CRC-16/CCITT-FALSE, and so is Sextant's `crc16`.
    assert_eq!(engine.framing.checksum, ChecksumKind::Crc16);
    assert_eq!(script(&engine.parser).0, ScriptLanguage::JavaScript);

    let battery = &p.sources[1];
    match &battery.connection {
        Connection::Tcp { host, port, .. } => {
            assert_eq!((host.as_str(), *port), ("192.168.4.1", 3333))
        }
        other => panic!("tcp expected, got {other:?}"),
    }
    assert_eq!(battery.framing.mode, FrameMode::StartOnly);
    assert_eq!(battery.framing.start, "#");
    assert_eq!(script(&battery.parser).0, ScriptLanguage::Lua);

    for title in ["Coolant Temp", "Oil Pressure", "RPM"] {
        assert_eq!(
            dataset(&p, title).source.as_deref(),
            Some("src-1"),
            "{title}"
        );
    }
    for title in ["Cell Temp", "Pack Current", "Pack Voltage"] {
        assert_eq!(
            dataset(&p, title).source.as_deref(),
            Some("src-2"),
            "{title}"
        );
    }
    assert_eq!(group(&p, "Battery").widget, GroupWidget::BarPanel);
    assert_eq!(group(&p, "Service Manual").widget, GroupWidget::WebView);
    let coolant = dataset(&p, "Coolant Temp");
    assert_eq!(coolant.alarms.len(), 2);
    assert_eq!(coolant.alarms[1].severity, Severity::Critical);

    let action = &p.actions[0];
    assert_eq!(action.source.as_deref(), Some("src-2"));
    // Escapes in the text are resolved, as Serial Studio sends them.
    assert_eq!(action.payload, "BAL\r");

    assert!(report.mentions("groups[2].widget"), "{report}");
    assert!(
        report.mentions("groups[0].datasets[0].alarmBands[1].blink"),
        "{report}"
    );
    assert!(
        report.mentions("sources[0].connection.deviceId.vid"),
        "{report}"
    );
}

#[test]
fn legacy_single_source_file_maps() {
    let Imported {
        project: p, report, ..
    } = import("legacy.json");
    assert_eq!(p.title, "Greenhouse Monitor");
    assert_eq!(p.sources.len(), 1);
    let s = &p.sources[0];
    // No frameDetection in a legacy file means start and end delimiters.
    assert_eq!(s.framing.mode, FrameMode::StartEnd);
    assert_eq!(
        (s.framing.start.as_str(), s.framing.end.as_slice()),
        ("/*", &["*/".to_string()][..])
    );
    // The old default parse(frame, separator) is exactly a split on the separator.
    assert_eq!(
        s.parser,
        ParserConfig::Delimited {
            separator: ",".into()
        }
    );
    assert!(matches!(s.connection, Connection::Serial(_)));

    let t = dataset(&p, "Temperature");
    assert_eq!(
        (t.min, t.max, t.widget),
        (Some(-10.0), Some(50.0), DatasetWidget::Gauge)
    );
    let bands: Vec<(f64, f64)> = t.alarms.iter().map(|a| (a.min, a.max)).collect();
    assert_eq!(bands, vec![(-10.0, 0.0), (40.0, 50.0)]);
    assert!(dataset(&p, "Pressure").alarms.is_empty());
    let h = dataset(&p, "Humidity");
    assert_eq!(
        (h.fft, h.fft_samples, h.led, h.led_threshold),
        (true, 512, true, Some(80.0))
    );
    assert_eq!(
        h.alarms.iter().map(|a| (a.min, a.max)).collect::<Vec<_>>(),
        vec![(90.0, 100.0)]
    );

    assert_eq!(group(&p, "Motion").widget, GroupWidget::Accelerometer);
    assert_eq!(dataset(&p, "Accel Z").role, Some(Role::Z));
    assert_eq!(
        (dataset(&p, "Accel Z").min, dataset(&p, "Accel Z").max),
        (None, None)
    );

    assert!(report.mentions("mapTilerApiKey"), "{report}");
    assert!(
        !report.to_string().contains("pk.placeholder-key"),
        "the report leaks the API key"
    );
    assert!(report.mentions("groups[0].datasets[2].alarm"), "{report}");
}
