//! The display's bounds as the UI reads them: `ui/src/lib/display/limits.gen.ts` is written
//! from the constants here, so the UI's settings clamp to exactly what
//! `DisplayOptions::validate` accepts, with no second copy of the numbers to drift.

use sextant_display::{MAX_RATE_HZ, MIN_RATE_HZ};

fn limits_ts() -> String {
    format!(
        "/* Generated from crates/display (sextant_display::MIN_RATE_HZ, MAX_RATE_HZ) by\n \
         * crates/display/tests/ui_limits.rs; do not edit. Regenerate with\n \
         * `SEXTANT_BLESS=1 cargo test -p sextant-display --test ui_limits`. */\n\
         \n\
         /** The slowest display rate the backend accepts (`refreshHz`), ticks per second. */\n\
         export const MIN_RATE_HZ = {MIN_RATE_HZ};\n\
         /** The fastest display rate the backend accepts (`refreshHz`), ticks per second. */\n\
         export const MAX_RATE_HZ = {MAX_RATE_HZ};\n"
    )
}

#[test]
fn the_ui_display_limits_are_current() {
    let text = limits_ts();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../ui/src/lib/display/limits.gen.ts");
    if std::env::var_os("SEXTANT_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == text,
        "ui/src/lib/display/limits.gen.ts is stale; regenerate it with \
         `SEXTANT_BLESS=1 cargo test -p sextant-display --test ui_limits`"
    );
}
