/* Generated from crates/display (sextant_display::MIN_RATE_HZ, MAX_RATE_HZ) by
 * crates/display/tests/ui_limits.rs; do not edit. Regenerate with
 * `SEXTANT_BLESS=1 cargo test -p sextant-display --test ui_limits`. */

/** The slowest display rate the backend accepts (`refreshHz`), ticks per second. */
export const MIN_RATE_HZ = 1;
/** The fastest display rate the backend accepts (`refreshHz`), ticks per second. */
export const MAX_RATE_HZ = 240;
