//! Projects in the shapes of Serial Studio's examples (`fixtures/serial-studio-shapes`):
//! their dashboard tabs arrive as workspaces whose tiles show the widgets the tabs showed,
//! laid out without overlaps, and the report tells lost behaviour first, by name.

use std::path::Path;

use sextant_import::{import_serial_studio, Imported, Severity};
use sextant_telemetry::project::{Project, Tile, TileView};

fn import(name: &str) -> Imported {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/serial-studio-shapes")
        .join(name);
    import_serial_studio(&std::fs::read_to_string(path).expect("fixture")).expect("imports")
}

/// What a tile shows, by title: `group:VU Meter`, `plot:Mic L`.
fn shows(p: &Project, t: &Tile) -> String {
    if let Some(g) = &t.group {
        let g = p
            .groups
            .iter()
            .find(|x| &x.id == g)
            .expect("tile's group exists");
        return format!("group:{}", g.title);
    }
    let id = t
        .dataset
        .as_deref()
        .expect("a tile shows a group or a dataset");
    let d = p
        .datasets()
        .find(|d| d.id == id)
        .expect("tile's dataset exists");
    let view = match t.view {
        Some(TileView::Plot) => "plot",
        Some(TileView::Fft) => "fft",
        Some(TileView::Led) => "led",
        Some(TileView::Waterfall) => "waterfall",
        Some(TileView::Widget) => "widget",
        None => "first",
    };
    format!("{view}:{}", d.title)
}

#[test]
fn workspaces_become_tabs_of_the_widgets_they_showed() {
    let Imported { project: p, .. } = import("vibration-rig.ssproj");
    let tabs: Vec<(&str, Vec<String>)> = p
        .workspaces
        .iter()
        .map(|w| {
            (
                w.title.as_str(),
                w.tiles.iter().map(|t| shows(&p, t)).collect(),
            )
        })
        .collect();
    assert_eq!(
        tabs,
        [
            (
                "Overview",
                vec![
                    "group:VU Meter".into(),
                    "waterfall:Vibration".into(),
                    "widget:Vibration (RMS)".into()
                ]
            ),
            (
                "Vibration (Campbell)",
                vec![
                    "plot:Vibration".into(),
                    "fft:Vibration".into(),
                    "waterfall:Vibration".into()
                ]
            ),
            (
                "VU Meter",
                vec![
                    "group:VU Meter".into(),
                    "plot:Mic L".into(),
                    "plot:Mic R".into()
                ]
            ),
            (
                "Motor",
                vec![
                    "group:Motor".into(),
                    // The second gauge of the dashboard, the first bar, the fourth plot.
                    "widget:Motor RPM".into(),
                    "widget:Motor temperature".into(),
                    "plot:Motor temperature".into(),
                    "widget:Vibration (RMS)".into(),
                    "plot:Vibration".into(),
                ]
            ),
        ],
        "a tab of only the terminal has nothing to draw and is left out"
    );
    assert_eq!(
        p.validate(),
        vec![],
        "the workspaces name real groups and datasets"
    );
}

#[test]
fn tiles_are_laid_out_on_the_grid_without_overlaps() {
    for name in ["vibration-rig.ssproj"] {
        let p = import(name).project;
        for w in &p.workspaces {
            for (i, a) in w.tiles.iter().enumerate() {
                assert!(
                    a.w >= 3 && a.h >= 2 && a.x + a.w <= 12,
                    "{}: tile {i} {a:?}",
                    w.title
                );
                for b in &w.tiles[i + 1..] {
                    let apart = a.x + a.w <= b.x
                        || b.x + b.w <= a.x
                        || a.y + a.h <= b.y
                        || b.y + b.h <= a.y;
                    assert!(apart, "{}: {a:?} overlaps {b:?}", w.title);
                }
            }
        }
        // Every row of every tab uses the whole width: no holes.
        for w in &p.workspaces {
            let mut rows = std::collections::BTreeMap::<u32, u32>::new();
            for t in &w.tiles {
                *rows.entry(t.y).or_default() += t.w;
            }
            assert!(rows.values().all(|&sum| sum == 12), "{}: {rows:?}", w.title);
        }
        // A tab of a few tiles shares the whole width.
        let vu = p.workspaces.iter().find(|w| w.title == "VU Meter").unwrap();
        assert_eq!(vu.tiles.iter().map(|t| t.w).sum::<u32>(), 12);
    }
}

#[test]
fn the_report_tells_lost_behaviour_first_by_name_and_not_the_defaults() {
    let Imported {
        report, summary, ..
    } = import("vibration-rig.ssproj");
    let lost: Vec<(&str, &str)> = summary
        .iter()
        .take_while(|s| s.severity == Severity::Lost)
        .map(|s| (s.subject.kind, s.subject.name.as_str()))
        .collect();
    // The control script is lost; the painter (VU Meter) now runs.
    assert_eq!(lost, [("project", "")], "{summary:#?}");
    assert!(
        summary.windows(2).all(|w| w[0].severity <= w[1].severity),
        "ordered by severity"
    );
    // Serial Studio's default FFT window is written into every dataset: not news.
    assert!(
        !report.items.iter().any(|i| i.path.ends_with("fftWindow")),
        "{report}"
    );
    // A display detail of many datasets is one line.
    let ticks: Vec<_> = summary
        .iter()
        .filter(|s| s.message.contains("`fftSamplingRate`"))
        .collect();
    assert!(ticks.len() <= 1, "{ticks:#?}");
    assert!(summary.len() < 16, "a short report: {summary:#?}");
    for s in &summary {
        assert!(
            !s.message.contains("function setup"),
            "no script text in the report: {}",
            s.message
        );
    }

    // The EM Wave shape's 3-D plot arrives as one, with its x, y and z.
    let em = import("em-wave.ssproj");
    assert!(
        !em.summary
            .iter()
            .any(|s| s.severity == Severity::Lost && s.subject.name == "Wave in 3-D"),
        "{:#?}",
        em.summary
    );
    let wave = em
        .project
        .groups
        .iter()
        .find(|g| g.title == "Wave in 3-D")
        .expect("the 3-D group");
    assert_eq!(wave.widget, sextant_telemetry::project::GroupWidget::Plot3d);
    let roles: Vec<_> = wave.datasets.iter().filter_map(|d| d.role).collect();
    assert_eq!(
        roles,
        [
            sextant_telemetry::project::Role::X,
            sextant_telemetry::project::Role::Y,
            sextant_telemetry::project::Role::Z
        ]
    );
    let gps = import("gps-imu.ssproj");
    assert!(
        gps.project.workspaces.is_empty(),
        "no tabs in the file: Sextant's overview"
    );
    assert!(
        gps.summary.iter().all(|s| s.severity != Severity::Lost),
        "{:#?}",
        gps.summary
    );
}

#[test]
fn an_output_group_arrives_as_controls_that_keep_their_scripts() {
    use sextant_telemetry::project::{ControlKind, GroupWidget};
    let Imported {
        project: p,
        summary,
        ..
    } = import("obd-ii.ssproj");
    assert!(p.validate().is_empty(), "{:#?}", p.validate());
    let group = p
        .groups
        .iter()
        .find(|g| g.title == "ELM327 commands")
        .expect("the output group is imported");
    assert_eq!(group.widget, GroupWidget::Output);
    assert!(group.datasets.is_empty());
    let got: Vec<(&str, ControlKind, f64, f64, f64, f64)> = group
        .controls
        .iter()
        .map(|c| (c.title.as_str(), c.kind, c.min, c.max, c.step, c.initial))
        .collect();
    assert_eq!(
        got,
        [
            (
                "Read engine speed",
                ControlKind::Button,
                0.0,
                100.0,
                1.0,
                0.0
            ),
            ("Monitor all", ControlKind::Toggle, 0.0, 100.0, 1.0, 0.0),
            ("Adaptive timing", ControlKind::Slider, 0.0, 2.0, 1.0, 1.0),
            ("Timeout (x4 ms)", ControlKind::Knob, 0.0, 255.0, 1.0, 50.0),
            ("Raw command", ControlKind::TextField, 0.0, 100.0, 1.0, 0.0),
        ]
    );
    let toggle = &group.controls[1];
    assert_eq!(toggle.on_label.as_deref(), Some("Monitoring"));
    assert_eq!(toggle.off_label.as_deref(), Some("Idle"));
    assert!(
        group.controls[3].transmit.contains("ATST"),
        "scripts kept as written"
    );
    // One source: the controls send to it without naming it.
    assert!(group.controls.iter().all(|c| c.source.is_none()));
    // The ramp generator has no Sextant control: told as lost, by its group's name.
    assert!(
        summary.iter().any(|s| s.severity == Severity::Lost
            && s.subject.name == "ELM327 commands"
            && s.message.contains("ramp generator")),
        "{summary:#?}"
    );
    // The group has a tile of its own on the overview.
    assert!(p.groups.iter().any(|g| g.widget == GroupWidget::Output));
}

#[test]
fn image_groups_arrive_with_how_they_find_their_pictures() {
    use sextant_telemetry::project::{GroupWidget, ImageDetection};
    let Imported {
        project: p,
        summary,
        ..
    } = import("camera-telemetry.ssproj");
    assert!(p.validate().is_empty(), "{:#?}", p.validate());
    let images: Vec<(&str, ImageDetection, &str, &str)> = p
        .groups
        .iter()
        .filter(|g| g.widget == GroupWidget::Image)
        .map(|g| {
            let s = g
                .image
                .as_ref()
                .expect("an image group has its stream settings");
            (
                g.title.as_str(),
                s.detection,
                s.start.as_str(),
                s.end.as_str(),
            )
        })
        .collect();
    assert_eq!(
        images,
        [
            ("Camera", ImageDetection::Auto, "", ""),
            (
                "Thermal (framed)",
                ImageDetection::Markers,
                "AA 55 AA 55",
                "55 AA 55 AA"
            ),
        ]
    );
    // Nothing of the image views is lost any more.
    assert!(
        summary.iter().all(|s| s.severity != Severity::Lost),
        "{summary:#?}"
    );
}

#[test]
fn painter_code_arrives_and_what_a_painter_cannot_do_here_is_reported() {
    use sextant_telemetry::project::GroupWidget;
    let Imported { project: p, .. } = import("vibration-rig.ssproj");
    let vu = p.groups.iter().find(|g| g.title == "VU Meter").unwrap();
    assert_eq!(vu.widget, GroupWidget::Painter);
    assert!(vu.painter_code.contains("function paint(ctx, w, h)"));

    // The same project with a painter that writes to the device, fires an action and draws
    // a file: each is told by name, and the code is still kept as written.
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/serial-studio-shapes/vibration-rig.ssproj");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let code = "function onFrame() { deviceWrite('X'); actionFire(2); }\n\
                function paint(ctx, w, h) { ctx.drawImage(\"logo.png\", 0, 0); }";
    for g in file["groups"].as_array_mut().unwrap() {
        if g["widget"] == "painter" {
            g["painterCode"] = code.into();
        }
    }
    let imported = import_serial_studio(&file.to_string()).expect("imports");
    let lost: Vec<&str> = imported
        .summary
        .iter()
        .filter(|s| s.severity == Severity::Lost && s.subject.name == "VU Meter")
        .map(|s| s.message.as_str())
        .collect();
    for says in ["deviceWrite", "actionFire", "image file"] {
        assert!(lost.iter().any(|m| m.contains(says)), "{says}: {lost:#?}");
    }
    let vu = imported
        .project
        .groups
        .iter()
        .find(|g| g.title == "VU Meter")
        .unwrap();
    assert_eq!(vu.painter_code, code);
}
