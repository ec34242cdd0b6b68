//! Any text as a project file: a clear error or a valid project that round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sextant_telemetry::Project;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(project) = Project::from_json_str(text) {
        let again =
            Project::from_json_str(&project.to_json_string()).expect("a saved project reloads");
        assert_eq!(again, project);
    }
});
