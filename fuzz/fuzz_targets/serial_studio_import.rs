//! Any text as a Serial Studio project: an error or a project, never a panic. A project it
//! returns is valid and survives the trip through the project file format.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_telemetry::Project;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(imported) = sextant_import::import_serial_studio(text) else {
        return;
    };
    let issues = imported.project.validate();
    assert!(
        issues.is_empty(),
        "an imported project validates: {issues:?}"
    );
    let reloaded = Project::from_json_str(&imported.project.to_json_string())
        .expect("an imported project reloads");
    assert_eq!(reloaded, imported.project);
});
