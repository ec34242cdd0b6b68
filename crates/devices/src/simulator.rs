//! The simulator: deterministic waveforms, a GPS track and an IMU, emitted as real CSV
//! bytes so the whole pipeline (framing, parsing, transforms) runs on them.
//!
//! The generator is pure: it is given the time of each frame and appends that frame's
//! bytes. Pacing (1 Hz … ≥ 1 MHz frames) belongs to whoever drives it.

use sextant_telemetry::project::{
    AlarmBand, Connection, Dataset, DatasetWidget, Group, GroupWidget, ParserConfig, Project, Role,
    Severity, SimChannel, SimulatorSettings, Source, Tile, TileView, Transform, TransformLanguage,
    Waveform, Workspace,
};

/// A seeded xorshift generator: fast, reproducible, no dependencies.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Uniform in [-0.5, 0.5).
    fn centered(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    }
}

/// Generates simulator frames.
#[derive(Debug, Clone)]
pub struct Simulator {
    settings: SimulatorSettings,
    rng: Rng,
    walks: Vec<f64>,
    /// The frame being formatted; kept to reuse its buffer.
    values: Vec<f64>,
}

/// Columns the simulator appends for its GPS track.
pub const GPS_COLUMNS: [&str; 3] = ["Latitude", "Longitude", "Altitude"];
/// Columns the simulator appends for its IMU.
pub const IMU_COLUMNS: [&str; 6] = [
    "Accel X", "Accel Y", "Accel Z", "Gyro X", "Gyro Y", "Gyro Z",
];

impl Simulator {
    pub fn new(settings: SimulatorSettings) -> Self {
        Simulator {
            rng: Rng::new(settings.seed),
            walks: vec![0.0; settings.channels.len()],
            settings,
            values: Vec::with_capacity(32),
        }
    }

    pub fn settings(&self) -> &SimulatorSettings {
        &self.settings
    }

    /// Column names in frame order.
    pub fn columns(&self) -> Vec<String> {
        let mut cols: Vec<String> = self
            .settings
            .channels
            .iter()
            .map(|c| c.name.clone())
            .collect();
        if self.settings.gps {
            cols.extend(GPS_COLUMNS.iter().map(|s| s.to_string()));
        }
        if self.settings.imu {
            cols.extend(IMU_COLUMNS.iter().map(|s| s.to_string()));
        }
        cols
    }

    /// The values of the frame at time `t` seconds.
    pub fn values_at(&mut self, t: f64, out: &mut Vec<f64>) {
        use std::f64::consts::TAU;
        out.clear();
        for (i, ch) in self.settings.channels.iter().enumerate() {
            let phase = (t * ch.frequency_hz).fract();
            let base = match ch.waveform {
                Waveform::Sine => (TAU * phase).sin(),
                Waveform::Square => {
                    if phase < 0.5 {
                        1.0
                    } else {
                        -1.0
                    }
                }
                Waveform::Saw => 2.0 * phase - 1.0,
                Waveform::Noise => 2.0 * self.rng.centered(),
                Waveform::RandomWalk => {
                    let step = self.rng.centered() * 0.1;
                    // Pull gently back towards zero so the walk stays on screen.
                    self.walks[i] = (self.walks[i] + step) * 0.999;
                    self.walks[i]
                }
            };
            let noise = if ch.noise > 0.0 {
                ch.noise * self.rng.centered()
            } else {
                0.0
            };
            out.push(ch.offset + ch.amplitude * base + noise);
        }
        if self.settings.gps {
            // A 300 m circle around a fixed point, one lap every two minutes.
            let a = TAU * t / 120.0;
            let (lat0, lon0) = (47.3769_f64, 8.5417_f64);
            let r_deg = 300.0 / 111_320.0;
            out.push(lat0 + r_deg * a.sin());
            out.push(lon0 + r_deg * a.cos() / lat0.to_radians().cos());
            out.push(420.0 + 15.0 * (a * 2.0).sin());
        }
        if self.settings.imu {
            let (roll, pitch) = (0.3 * (TAU * 0.2 * t).sin(), 0.2 * (TAU * 0.13 * t).cos());
            out.push(9.81 * pitch.sin() + 0.05 * self.rng.centered());
            out.push(-9.81 * roll.sin() * pitch.cos() + 0.05 * self.rng.centered());
            out.push(9.81 * roll.cos() * pitch.cos() + 0.05 * self.rng.centered());
            out.push(0.3 * TAU * 0.2 * (TAU * 0.2 * t).cos() * 57.3);
            out.push(-0.2 * TAU * 0.13 * (TAU * 0.13 * t).sin() * 57.3);
            out.push(10.0 * (TAU * 0.05 * t).sin());
        }
    }

    /// Appends the bytes of the frame at time `t` seconds: a CSV line ending in `\n`.
    pub fn frame_at(&mut self, t: f64, out: &mut Vec<u8>) {
        let mut values = std::mem::take(&mut self.values);
        self.values_at(t, &mut values);
        for (i, &v) in values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_six_decimals(out, v);
        }
        out.push(b'\n');
        self.values = values;
    }
}

/// Appends `v` with six decimals, as a device printing `%.6f` would.
///
/// Why not `{v:.6}`: the standard formatter rounds the exact binary value, which takes it
/// ~100 ns a number, and at 100 000 frames/s of 16 channels the simulator formats 1.6 M
/// numbers a second on the machine whose cores the app itself needs – a real device does
/// that on its own chip. Scaling by 10⁶ and rounding is exact whenever the scaled value is an
/// integer below 2⁵³; it may round a value that sits on a half of the sixth decimal the other
/// way, which is the device's choice to make. Anything larger, infinite or NaN takes the
/// standard way.
fn push_six_decimals(out: &mut Vec<u8>, v: f64) {
    // 9·10⁹ · 10⁶ = 9·10¹⁵ < 2⁵³: every scaled value below it is held exactly.
    if v.is_nan() || v.abs() >= 9.0e9 {
        use std::io::Write as _;
        let _ = write!(out, "{v:.6}");
        return;
    }
    let scaled = (v * 1e6).round();
    if scaled < 0.0 {
        out.push(b'-');
    }
    let magnitude = scaled.abs() as u64;
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(magnitude / 1_000_000).as_bytes());
    out.push(b'.');
    let fraction = digits.format(magnitude % 1_000_000).as_bytes();
    out.extend(std::iter::repeat_n(b'0', 6 - fraction.len()));
    out.extend_from_slice(fraction);
}

/// The demo device's settings: five waveforms, a GPS track and an IMU at 100 Hz.
pub fn demo_settings() -> SimulatorSettings {
    let ch = |name: &str, waveform, frequency_hz, amplitude, offset, noise| SimChannel {
        name: name.into(),
        waveform,
        frequency_hz,
        amplitude,
        offset,
        noise,
    };
    SimulatorSettings {
        frame_rate_hz: 100.0,
        channels: vec![
            ch("Temperature", Waveform::Sine, 0.05, 4.0, 24.0, 0.1),
            ch("Voltage", Waveform::Sine, 0.5, 0.4, 3.7, 0.02),
            ch("Current", Waveform::Square, 0.25, 0.3, 0.5, 0.01),
            ch("Pressure", Waveform::RandomWalk, 0.0, 1.0, 1013.0, 0.0),
            ch("Vibration", Waveform::Noise, 0.0, 1.0, 0.0, 0.0),
        ],
        gps: true,
        imu: true,
        seed: 7,
    }
}

/// The sample project that goes with [`demo_settings`]: gauges, plots, a GPS map, an IMU,
/// an alarm band, an expression transform and a scripted virtual dataset.
pub fn demo_project() -> Project {
    Project {
        title: "Demo device".into(),
        sources: vec![demo_source()],
        groups: vec![
            environment_group(),
            power_group(),
            role_group("grp-3", "GPS", GroupWidget::Gps, &GPS_DATASETS),
            role_group(
                "grp-4",
                "Accelerometer",
                GroupWidget::Accelerometer,
                &ACCELEROMETER_DATASETS,
            ),
            role_group(
                "grp-5",
                "Gyroscope",
                GroupWidget::Gyroscope,
                &GYROSCOPE_DATASETS,
            ),
        ],
        workspaces: demo_workspaces(),
        ..Project::default()
    }
}

/// The demo's one source: the simulator with [`demo_settings`], read as CSV.
fn demo_source() -> Source {
    Source {
        id: "src-1".into(),
        title: "Simulator".into(),
        connection: Connection::Simulator(demo_settings()),
        parser: ParserConfig::Delimited {
            separator: ",".into(),
        },
        ..Source::default()
    }
}

/// A plain demo dataset. The ids are spelled out because the power transform and the
/// dashboard tiles refer to them.
fn dataset(id: &str, title: &str, units: &str, index: u32) -> Dataset {
    Dataset {
        id: id.into(),
        title: title.into(),
        units: units.into(),
        index,
        ..Dataset::default()
    }
}

fn group(id: &str, title: &str, widget: GroupWidget, datasets: Vec<Dataset>) -> Group {
    Group {
        id: id.into(),
        title: title.into(),
        widget,
        datasets,
        ..Group::default()
    }
}

/// Temperature with a gauge and an alarm band, pressure through an expression transform,
/// and vibration with an FFT.
fn environment_group() -> Group {
    let temperature = Dataset {
        widget: DatasetWidget::Gauge,
        min: Some(0.0),
        max: Some(50.0),
        alarms: vec![AlarmBand {
            min: 27.0,
            max: 50.0,
            severity: Severity::Warning,
            label: "Warm".into(),
        }],
        ..dataset("ds-1", "Temperature", "°C", 1)
    };
    let pressure = Dataset {
        widget: DatasetWidget::Meter,
        // The device reports hPa; show kPa.
        transform: Some(Transform {
            language: TransformLanguage::Expression,
            code: "value / 10".into(),
        }),
        ..dataset("ds-4", "Pressure", "kPa", 4)
    };
    let vibration = Dataset {
        fft: true,
        ..dataset("ds-5", "Vibration", "g", 5)
    };
    group(
        "grp-1",
        "Environment",
        GroupWidget::DataGrid,
        vec![temperature, pressure, vibration],
    )
}

/// Voltage and current, and power as a Lua virtual dataset computed from them.
fn power_group() -> Group {
    let voltage = Dataset {
        widget: DatasetWidget::Bar,
        min: Some(3.0),
        max: Some(4.2),
        ..dataset("ds-2", "Voltage", "V", 2)
    };
    let current = Dataset {
        min: Some(0.0),
        max: Some(1.0),
        ..dataset("ds-3", "Current", "A", 3)
    };
    let power = Dataset {
        is_virtual: true,
        index: 0,
        transform: Some(Transform {
            language: TransformLanguage::Lua,
            code: "function transform(value)\n  \
                   local v = datasetGetFinal(\"ds-2\")\n  \
                   local i = datasetGetFinal(\"ds-3\")\n  \
                   if v == nil or i == nil then return nil end\n  \
                   return v * i\nend\n"
                .into(),
        }),
        ..dataset("ds-6", "Power", "W", 0)
    };
    group(
        "grp-2",
        "Power",
        GroupWidget::MultiPlot,
        vec![voltage, current, power],
    )
}

/// A demo dataset that plays a role in its group's widget: (id, title, units, parser slot,
/// role).
type RoleDataset = (&'static str, &'static str, &'static str, u32, Role);

const GPS_DATASETS: [RoleDataset; 3] = [
    ("ds-7", "Latitude", "°", 6, Role::Lat),
    ("ds-8", "Longitude", "°", 7, Role::Lon),
    ("ds-9", "Altitude", "m", 8, Role::Alt),
];

const ACCELEROMETER_DATASETS: [RoleDataset; 3] = [
    ("ds-10", "Accel X", "m/s²", 9, Role::X),
    ("ds-11", "Accel Y", "m/s²", 10, Role::Y),
    ("ds-12", "Accel Z", "m/s²", 11, Role::Z),
];

const GYROSCOPE_DATASETS: [RoleDataset; 3] = [
    ("ds-13", "Gyro X", "°/s", 12, Role::Roll),
    ("ds-14", "Gyro Y", "°/s", 13, Role::Pitch),
    ("ds-15", "Gyro Z", "°/s", 14, Role::Yaw),
];

/// A group whose widget draws its datasets by role (GPS map, accelerometer, gyroscope).
fn role_group(id: &str, title: &str, widget: GroupWidget, datasets: &[RoleDataset]) -> Group {
    let datasets = datasets
        .iter()
        .map(|&(id, title, units, index, role)| Dataset {
            role: Some(role),
            ..dataset(id, title, units, index)
        })
        .collect();
    group(id, title, widget, datasets)
}

/// Two dashboard tabs on a 12-column grid: the signals, then where the device is.
fn demo_workspaces() -> Vec<Workspace> {
    vec![
        Workspace {
            id: "ws-1".into(),
            title: "Overview".into(),
            tiles: vec![
                tile(Some("grp-2"), None, (0, 0, 8, 4)),
                tile(Some("grp-1"), None, (8, 0, 4, 4)),
                tile(None, Some("ds-1"), (0, 4, 3, 4)),
                tile(None, Some("ds-2"), (3, 4, 3, 4)),
                Tile {
                    view: Some(TileView::Fft),
                    ..tile(None, Some("ds-5"), (6, 4, 6, 4))
                },
            ],
            extra: Default::default(),
        },
        Workspace {
            id: "ws-2".into(),
            title: "Navigation".into(),
            tiles: vec![
                tile(Some("grp-3"), None, (0, 0, 6, 8)),
                tile(Some("grp-4"), None, (6, 0, 3, 4)),
                tile(Some("grp-5"), None, (9, 0, 3, 4)),
                tile(None, Some("ds-3"), (6, 4, 6, 4)),
            ],
            extra: Default::default(),
        },
    ]
}

fn tile(group: Option<&str>, dataset: Option<&str>, (x, y, w, h): (u32, u32, u32, u32)) -> Tile {
    Tile {
        group: group.map(Into::into),
        dataset: dataset.map(Into::into),
        view: None,
        x,
        y,
        w,
        h,
    }
}

#[cfg(test)]
mod tests {
    use super::push_six_decimals;

    fn six(v: f64) -> String {
        let mut out = Vec::new();
        push_six_decimals(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    /// Values of every size a simulator channel can take (offsets, amplitudes, GPS degrees,
    /// noise near zero) and the edges of the fast way.
    #[test]
    fn six_decimals_read_back_as_the_value_within_half_a_millionth() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            0.0000005,
            -0.0000005,
            0.0000004,
            -0.0000004,
            0.999_999_5,
            -0.999_999_5,
            47.3769,
            8.5417,
            420.0,
            9.81,
            8_999_999_999.999_999,
            -8.999e9,
            9.0e9,
            -9.0e9,
            1.0e300,
            f64::MAX,
            f64::MIN_POSITIVE,
            1.0e-300,
        ];
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
            let scale = 10f64.powi((x % 13) as i32 - 3); // 10⁻³ … 10⁹
            values.push((unit - 0.5) * 2.0 * scale);
        }
        for v in values {
            let text = six(v);
            let back: f64 = text.parse().unwrap_or_else(|_| panic!("{v}: {text:?}"));
            let dot = text.find('.').unwrap_or_else(|| panic!("{v}: {text:?}"));
            assert_eq!(text.len() - dot - 1, 6, "{v}: {text:?}");
            // Within half a unit of the sixth decimal, and the scaling's own rounding.
            let bound = 0.5e-6 + v.abs() * 4.0 * f64::EPSILON;
            assert!((back - v).abs() <= bound, "{v}: {text:?}");
            // The standard way agrees, up to one unit of the last decimal on a half.
            let standard: f64 = format!("{v:.6}").parse().unwrap();
            assert!(
                (back - standard).abs() <= 1.0e-6 + v.abs() * 4.0 * f64::EPSILON,
                "{v}: {text:?}"
            );
        }
        for special in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(six(special), format!("{special:.6}"));
        }
    }
}
