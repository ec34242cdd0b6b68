//! Frames for fixtures/can/vehicle.dbc and the physical values they must decode to,
//! worked out by hand from the DBC rules (not by the decoder under test).

/// (SLCAN line as the adapter sends it, without `\r`; signal → value it must update).
pub const FRAMES: &[(&str, &[(&str, f64)])] = &[
    // Engine 0x100, Intel: EngineSpeed = 0x2EE0 (12000) · 0.25 = 3000 rpm;
    // CoolantTemp = 0x7D (125) − 40 = 85 °C; ThrottlePos = 0x7F (127) · 0.4 = 50.8 %.
    (
        "t1008E02E7D7F00000000",
        &[
            ("EngineSpeed", 3000.0),
            ("CoolantTemp", 85.0),
            ("ThrottlePos", 50.8),
        ],
    ),
    // Chassis 0x200, Motorola: SteeringAngle = bytes 0–1 0xFE39 = −455 · 0.1 = −45.5°;
    // YawRate = byte 2 + high nibble of byte 3, 0xFCE (12-bit) = −50 · 0.05 = −2.5 °/s;
    // WheelSpeedFL = bytes 4–5 0x3039 = 12345 · 0.01 = 123.45 km/h.
    (
        "t2008FE39FCE030390000",
        &[
            ("SteeringAngle", -45.5),
            ("YawRate", -2.5),
            ("WheelSpeedFL", 123.45),
        ],
    ),
    // Battery 0x18FF0001 (extended), Mux = 0: PackVoltage = 0x9C40 (40000) · 0.01 = 400 V;
    // PackCurrent = 0xFF06 (−250) · 0.1 − 100 = −125 A; SoC = 0xAA (170) · 0.5 = 85 %.
    (
        "T18FF0001800409C06FF0000AA",
        &[
            ("Mux", 0.0),
            ("PackVoltage", 400.0),
            ("PackCurrent", -125.0),
            ("SoC", 85.0),
        ],
    ),
    // Battery, Mux = 1: CellTempMax = 0x4B (75) − 40 = 35 °C; CellTempMin = 0x3E (62) − 40
    // = 22 °C; SoC = 0xA9 (169) · 0.5 = 84.5 %. PackVoltage/PackCurrent are not in this
    // frame and keep 400 V / −125 A.
    (
        "T18FF00018014B3E00000000A9",
        &[
            ("Mux", 1.0),
            ("CellTempMax", 35.0),
            ("CellTempMin", 22.0),
            ("SoC", 84.5),
        ],
    ),
    // Environment 0x300, CAN FD with bit-rate switch, 16 bytes (DLC code A):
    // AmbientPressure = float32 0x42CB0000 = 101.5 kPa; Odometer = bytes 12–15 0x0012D687
    // (1234567) · 0.1 = 123456.7 km.
    (
        "b300A0000CB42000000000000000087D61200",
        &[("AmbientPressure", 101.5), ("Odometer", 123456.7)],
    ),
];

/// Lines that must update nothing: a remote request for Engine, a frame of an id the DBC
/// does not define.
pub const IGNORED: &[&str] = &["r1008", "t7770"];

/// Every imported signal, in slot order.
pub const SIGNALS: [&str; 14] = [
    "EngineSpeed",
    "CoolantTemp",
    "ThrottlePos",
    "SteeringAngle",
    "YawRate",
    "WheelSpeedFL",
    "Mux",
    "PackVoltage",
    "PackCurrent",
    "CellTempMax",
    "CellTempMin",
    "SoC",
    "AmbientPressure",
    "Odometer",
];

pub fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}
