//! Synthetic corpora for benchmarks: deterministic, domain-shaped rows (ports, baud rates,
//! topics, CAN ids, paths, Chinese facts) in any number, and queries over them, so latency
//! can be measured at sizes no hand-written fixture reaches.

/// A small deterministic generator (xorshift); the same seed gives the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

const DEVICES: &[&str] = &[
    "rover",
    "bench PSU",
    "thermal chamber",
    "drone",
    "BMS",
    "weather mast",
    "motor controller",
    "GPS puck",
];
const PORTS: &[&str] = &[
    "/dev/ttyUSB0",
    "/dev/ttyACM1",
    "COM7",
    "/dev/ttyS3",
    "192.168.4.1:502",
    "can0",
    "vcan1",
];
const RATES: &[&str] = &["9600", "57600", "115200", "230400", "921600", "500k", "1M"];
const TOPICS: &[&str] = &[
    "lab/bench3/psu/voltage",
    "sensors/+/temp",
    "rover/imu/accel",
    "field/mast/wind",
];
const SIGNALS: &[&str] = &[
    "EngineSpeed",
    "BMS_PackVoltage",
    "CellTempMax",
    "WheelSpeedFL",
    "ThrottlePos",
];
const PATHS: &[&str] = &[
    "parsers/imu.lua",
    "projects/rover/telemetry.json",
    "scripts/decode_frame.js",
    "crates/x/y.rs",
];
const ZH: &[&str] = &[
    "串口断开后自动重连三次",
    "我更喜欢用深色主题看波形",
    "电池电压低于三点三伏要报警",
    "温度曲线每秒刷新一次",
];
const VERBS: &[&str] = &[
    "runs at",
    "was moved to",
    "reports",
    "drops frames on",
    "must not exceed",
    "logs to",
];

/// Row `i` of a synthetic corpus: (id, scope, content). Scopes cycle over `scopes`.
pub fn row(seed: u64, i: usize, scopes: usize) -> (String, String, String) {
    let mut r = Rng(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    for _ in 0..3 {
        r.next();
    }
    let content = match r.next() % 5 {
        0 => format!(
            "The {} on {} {} {} baud",
            r.pick(DEVICES),
            r.pick(PORTS),
            r.pick(VERBS),
            r.pick(RATES)
        ),
        1 => format!(
            "The {} publishes {} on topic {}",
            r.pick(DEVICES),
            r.pick(SIGNALS),
            r.pick(TOPICS)
        ),
        2 => format!(
            "CAN id 0x{:X} carries {} for the {}",
            0x100 + r.next() % 0x700,
            r.pick(SIGNALS),
            r.pick(DEVICES)
        ),
        3 => format!(
            "The parser in {} decodes the {} frames; see parseFrame",
            r.pick(PATHS),
            r.pick(DEVICES)
        ),
        _ => format!("{}（{}）", r.pick(ZH), r.pick(DEVICES)),
    };
    (
        format!("r{i:07}"),
        format!("scope-{}", i % scopes.max(1)),
        format!("{content} #{i}"),
    )
}

/// Query texts of the kinds people ask, for latency runs.
pub const QUERIES: &[&str] = &[
    "what baud rate does the rover use",
    "which topic carries BMS_PackVoltage",
    "CAN id for EngineSpeed",
    "parsers/imu.lua frame decoding",
    "串口断开重连",
    "the uart bitrate of the GPS puck",
    "where does the thermal chamber log to",
    "parseFrame in decode_frame.js",
];
