//! Every built-in parser and decoder on any input: errors are fine, panics are not.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sextant_scripting::{Limits, NoHost};
use sextant_telemetry::decode::{decode, Decoder};
use sextant_telemetry::parse::build_parser;
use sextant_telemetry::project::ParserConfig;
use sextant_telemetry::Rows;

fuzz_target!(|data: &[u8]| {
    let configs = [
        r#"{"kind":"quickPlot"}"#,
        r#"{"kind":"delimited","separator":";"}"#,
        r#"{"kind":"fixedWidth","widths":[1,3,7]}"#,
        r#"{"kind":"keyValue","keys":["a","b"]}"#,
        r#"{"kind":"json","paths":["a.b[1]","/c/0","d"]}"#,
        r#"{"kind":"nmea"}"#,
        r#"{"kind":"binary","fields":[{"type":"u8"},{"type":"f64","endian":"big"},{"type":"i32","offset":3}]}"#,
        r#"{"kind":"can","messages":[{"id":256,"signals":[{"name":"a","startBit":0,"size":12},{"name":"b","startBit":23,"size":40,"byteOrder":"big","valueType":"signed","mux":{"switch":"a","ranges":[[1,9]]}}]},{"id":4096,"extended":true,"signals":[{"name":"f","startBit":480,"size":32,"valueType":"float"}]}]}"#,
    ];
    let decoders = [
        Decoder::PlainText,
        Decoder::Hex,
        Decoder::Base64,
        Decoder::Binary,
        Decoder::Cobs,
        Decoder::Slip,
    ];
    let mut rows = Rows::new();
    for config in configs {
        let config: ParserConfig = serde_json::from_str(config).unwrap();
        let mut parser = build_parser(&config, Limits::default(), Arc::new(NoHost)).unwrap();
        for decoder in decoders {
            if let Ok(decoded) = decode(decoder, data) {
                rows.clear();
                let _ = parser.parse(&decoded, &mut rows);
            }
        }
    }
});
