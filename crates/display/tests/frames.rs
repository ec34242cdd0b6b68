//! Display frames end to end: frames pushed through the sink come out of `Scope::frame`
//! decimated, aligned and complete, read back with an independent decoder.

use bytes::Bytes;
use sextant_display::{decode_header, DisplayOptions, Scope, CONSOLE_BYTES, HEADER_BYTES};
use sextant_telemetry::pipeline::DatasetInfo;
use sextant_telemetry::Chunk;
use sextant_telemetry::FrameSink;
use sextant_telemetry::{FrameEvent, Timestamp, Value};

fn info(n: usize) -> Vec<DatasetInfo> {
    (0..n)
        .map(|i| DatasetInfo {
            id: format!("d{i}"),
            title: format!("Dataset {i}"),
            group: "G".into(),
            units: "V".into(),
            source: Some(0),
            slot: Some(i),
        })
        .collect()
}

fn ts(t: f64) -> Timestamp {
    Timestamp {
        elapsed_ns: (t * 1e9).round() as u64,
        unix_ns: 0,
    }
}

fn push(sink: &mut impl FrameSink, t: f64, values: &[Value], datasets: &[DatasetInfo]) {
    let event = FrameEvent {
        source: 0,
        timestamp: ts(t),
        values,
    };
    sink.frame(&event, datasets);
}

#[derive(Debug)]
struct Block {
    index: u32,
    last: f64,
    t: Vec<f64>,
    v: Vec<f64>,
    raw_t: Vec<f64>,
    raw_v: Vec<f64>,
}

#[derive(Debug)]
struct Decoded {
    meta: Option<serde_json::Value>,
    text: Option<serde_json::Value>,
    blocks: Vec<Block>,
    console: Vec<(f64, u32, Vec<u8>)>,
}

fn decode(buf: &[u8]) -> Decoded {
    let h = decode_header(buf).expect("header");
    assert_eq!(buf.len() % 8, 0, "frames are padded to 8 bytes");
    let mut at = HEADER_BYTES;
    let pad = |n: usize| (n + 7) & !7;
    let f64s = |at: &mut usize, n: usize| -> Vec<f64> {
        let v = (0..n)
            .map(|i| f64::from_le_bytes(buf[*at + 8 * i..*at + 8 * i + 8].try_into().unwrap()))
            .collect();
        *at += 8 * n;
        v
    };
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
    let mut meta = None;
    if h.meta_bytes > 0 {
        meta = Some(serde_json::from_slice(&buf[at..at + h.meta_bytes as usize]).unwrap());
        at += pad(h.meta_bytes as usize);
    }
    let mut text = None;
    if h.text_bytes > 0 {
        text = Some(serde_json::from_slice(&buf[at..at + h.text_bytes as usize]).unwrap());
        at += pad(h.text_bytes as usize);
    }
    let mut blocks = Vec::new();
    for _ in 0..h.datasets {
        let (index, n, m) = (u32_at(at), u32_at(at + 4) as usize, u32_at(at + 8) as usize);
        let last = f64::from_le_bytes(buf[at + 16..at + 24].try_into().unwrap());
        at += 24;
        let t = f64s(&mut at, n);
        let v = f64s(&mut at, n);
        let raw_t = f64s(&mut at, m);
        let raw_v = f64s(&mut at, m);
        blocks.push(Block {
            index,
            last,
            t,
            v,
            raw_t,
            raw_v,
        });
    }
    let mut console = Vec::new();
    for _ in 0..h.console {
        let t = f64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
        let (source, len) = (u32_at(at + 8), u32_at(at + 12) as usize);
        at += 16;
        console.push((t, source, buf[at..at + len].to_vec()));
        at += pad(len);
    }
    assert_eq!(at, buf.len(), "no trailing bytes");
    Decoded {
        meta,
        text,
        blocks,
        console,
    }
}

#[test]
fn first_frame_names_the_datasets_and_later_ones_do_not() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(2);
    push(
        &mut sink,
        0.5,
        &[Value::Number(1.0), Value::Number(2.0)],
        &ds,
    );
    let mut sub = scope.subscribe();
    let opts = DisplayOptions::default();
    let f = decode(&scope.frame(&opts, &mut sub).unwrap());
    let meta = f.meta.expect("first frame has meta");
    assert_eq!(meta["datasets"][1]["id"], "d1");
    assert_eq!(meta["datasets"][1]["index"], 1);
    assert_eq!(f.blocks.len(), 2);
    assert_eq!(f.blocks[1].last, 2.0);
    assert_eq!(f.blocks[1].t, vec![0.5]);

    assert!(
        scope.frame(&opts, &mut sub).is_none(),
        "nothing new, nothing sent"
    );
    push(
        &mut sink,
        0.6,
        &[Value::Number(3.0), Value::Number(4.0)],
        &ds,
    );
    let buf = scope.frame(&opts, &mut sub).unwrap();
    assert_eq!(decode_header(&buf).unwrap().seq, 1);
    assert_eq!(decode_header(&buf).unwrap().frames, 2);
    let f = decode(&buf);
    assert!(f.meta.is_none());
    assert_eq!(f.blocks[0].v, vec![1.0, 3.0]);
}

#[test]
fn windows_are_decimated_with_spikes_kept_and_raw_tails_aligned() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(2);
    // 20 s at 1 kHz; a single spike at t = 15.0005.
    for i in 0..20_000 {
        let t = i as f64 / 1000.0;
        let spike = if i == 15_000 { 1000.0 } else { (t * 3.0).sin() };
        push(&mut sink, t, &[Value::Number(spike), Value::Number(t)], &ds);
    }
    let mut sub = scope.subscribe();
    let mut opts = DisplayOptions {
        points: 200,
        time_range_s: 10.0,
        ..DisplayOptions::default()
    };
    opts.raw.insert(1, 256);
    let f = decode(&scope.frame(&opts, &mut sub).unwrap());
    let b0 = &f.blocks[0];
    assert!(
        b0.t.len() <= 200 && b0.t.len() >= 100,
        "{} points",
        b0.t.len()
    );
    assert!(b0.t.windows(2).all(|w| w[0] <= w[1]), "time order");
    assert!(
        b0.t[0] >= 19.999 - 10.0 - 1e-9,
        "window starts at now - range: {}",
        b0.t[0]
    );
    assert_eq!(*b0.t.last().unwrap(), 19.999);
    assert!(b0.v.contains(&1000.0), "the spike survives decimation");
    assert!(b0.raw_t.is_empty(), "raw only where asked");
    let b1 = &f.blocks[1];
    assert_eq!(b1.index, 1);
    assert_eq!(b1.raw_t.len(), 256);
    assert_eq!(
        b1.raw_t, b1.raw_v,
        "dataset 1's value is its time: columns stay aligned"
    );
    assert_eq!(*b1.raw_t.last().unwrap(), 19.999);
    for (t, v) in b0.t.iter().zip(&b0.v) {
        let expect = if (*t - 15.0).abs() < 1e-9 {
            1000.0
        } else {
            (t * 3.0).sin()
        };
        assert!(
            (v - expect).abs() < 1e-12,
            "t={t}: value {v} is a real sample"
        );
    }
}

/// A plot asks for about two points per pixel of its width, whatever `points` stores; a
/// dataset no plot draws is sent without a window; the raw tail and newest value still come.
#[test]
fn each_dataset_gets_the_window_its_plot_can_show() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(3);
    for i in 0..20_000 {
        let t = i as f64 / 1000.0;
        let spike = if i == 15_000 { 1000.0 } else { (t * 3.0).sin() };
        push(
            &mut sink,
            t,
            &[Value::Number(spike), Value::Number(t), Value::Number(-t)],
            &ds,
        );
    }
    let mut opts = DisplayOptions {
        points: 10_000,
        ..DisplayOptions::default()
    };
    opts.windows.insert(0, 800); // a 400-pixel plot
    opts.windows.insert(1, 0); // drawn by nothing that needs a window
    opts.windows.insert(2, 50_000); // more than `points`: `points` holds
    opts.raw.insert(1, 16);
    let f = decode(&scope.frame(&opts, &mut scope.subscribe()).unwrap());
    let (b0, b1, b2) = (&f.blocks[0], &f.blocks[1], &f.blocks[2]);
    assert!(
        (400..=800).contains(&b0.t.len()),
        "{} points for an 800-point window",
        b0.t.len()
    );
    assert!(
        b0.v.contains(&1000.0),
        "the spike survives the coarser window"
    );
    assert_eq!(*b0.t.last().unwrap(), 19.999, "the window reaches now");
    assert!(
        b1.t.is_empty() && b1.v.is_empty(),
        "no window: {}",
        b1.t.len()
    );
    assert_eq!(b1.last, 19.999, "its newest value still comes");
    assert_eq!(b1.raw_t.len(), 16, "and its raw tail");
    assert!(
        (5_000..=10_000).contains(&b2.t.len()),
        "{} points, at most `points`",
        b2.t.len()
    );
    let o: DisplayOptions = serde_json::from_str(r#"{"windows": {"3": 640}}"#).unwrap();
    assert_eq!(o.windows.get(&3), Some(&640));
}

#[test]
fn text_values_leave_a_gap_and_travel_as_text() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(2);
    push(
        &mut sink,
        1.0,
        &[Value::Number(1.0), Value::Text("OK".into())],
        &ds,
    );
    push(
        &mut sink,
        2.0,
        &[Value::Number(2.0), Value::Text("FAULT \"x\"".into())],
        &ds,
    );
    let f = decode(
        &scope
            .frame(&DisplayOptions::default(), &mut scope.subscribe())
            .unwrap(),
    );
    assert_eq!(f.text.unwrap()["1"], "FAULT \"x\"");
    assert!(f.blocks[1].last.is_nan());
    assert!(f.blocks[1].v.iter().all(|v| v.is_nan()));
}

#[test]
fn text_that_reads_as_a_number_is_plotted_as_that_number() {
    // What `frame.split(',')` in a Serial Studio parser hands over: strings.
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(3);
    let rows: &[[&str; 3]] = &[[" 1.5", "-40", "OK"], ["2.25 ", "1e3", "nan?"]];
    for (t, row) in rows.iter().enumerate() {
        let values: Vec<Value> = row.iter().map(|s| Value::Text(s.to_string())).collect();
        push(&mut sink, t as f64, &values, &ds);
    }
    let f = decode(
        &scope
            .frame(&DisplayOptions::default(), &mut scope.subscribe())
            .unwrap(),
    );
    assert_eq!(f.blocks[0].v, [1.5, 2.25]);
    assert_eq!(f.blocks[1].v, [-40.0, 1000.0]);
    assert_eq!((f.blocks[0].last, f.blocks[1].last), (2.25, 1000.0));
    // Text that is no number stays text, a gap in the plot.
    assert!(f.blocks[2].last.is_nan());
    let text = f.text.unwrap();
    assert_eq!(text["2"], "nan?");
    assert!(text.get("0").is_none() && text.get("1").is_none(), "{text}");
}

#[test]
fn console_bytes_arrive_once_per_subscriber_and_stay_bounded() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let chunk = |t: f64, data: &[u8]| Chunk {
        data: Bytes::copy_from_slice(data),
        timestamp: ts(t),
    };
    sink.chunk(0, &chunk(0.1, b"hello\r\n"));
    sink.chunk(1, &chunk(0.2, b"\x00\xffbin"));
    let opts = DisplayOptions::default();
    let mut a = scope.subscribe();
    let f = decode(&scope.frame(&opts, &mut a).unwrap());
    assert_eq!(
        f.console,
        vec![
            (0.1, 0, b"hello\r\n".to_vec()),
            (0.2, 1, b"\x00\xffbin".to_vec())
        ]
    );
    assert!(scope.frame(&opts, &mut a).is_none());
    sink.chunk(0, &chunk(0.3, b"more"));
    let f = decode(&scope.frame(&opts, &mut a).unwrap());
    assert_eq!(
        f.console,
        vec![(0.3, 0, b"more".to_vec())],
        "only what is new"
    );

    // A late subscriber starts with what is kept; the keep is bounded.
    for i in 0..100 {
        sink.chunk(0, &chunk(1.0 + i as f64, &vec![b'x'; 16 * 1024]));
    }
    let f = decode(&scope.frame(&opts, &mut scope.subscribe()).unwrap());
    let kept: usize = f.console.iter().map(|c| c.2.len()).sum();
    assert!(
        kept <= CONSOLE_BYTES && kept > CONSOLE_BYTES / 2,
        "kept {kept}"
    );
    assert_eq!(f.console.last().unwrap().0, 100.0);
}

/// A page showing no console does not get the device's bytes (a fast text device sends
/// megabytes a second); when it opens one, the bytes still kept arrive first.
#[test]
fn console_bytes_come_only_to_a_page_that_shows_them() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let chunk = |t: f64, data: &[u8]| Chunk {
        data: Bytes::copy_from_slice(data),
        timestamp: ts(t),
    };
    let ds = info(1);
    let quiet = DisplayOptions {
        console: false,
        ..DisplayOptions::default()
    };
    let mut sub = scope.subscribe();
    sink.chunk(0, &chunk(0.1, b"one\n"));
    push(&mut sink, 0.1, &[Value::Number(1.0)], &ds);
    let f = decode(&scope.frame(&quiet, &mut sub).unwrap());
    assert!(f.console.is_empty(), "{:?}", f.console);
    sink.chunk(0, &chunk(0.2, b"two\n"));
    assert!(
        scope.frame(&quiet, &mut sub).is_none(),
        "console bytes alone wake no one who does not show them"
    );
    let f = decode(&scope.frame(&DisplayOptions::default(), &mut sub).unwrap());
    assert_eq!(
        f.console,
        vec![(0.1, 0, b"one\n".to_vec()), (0.2, 0, b"two\n".to_vec())],
        "opened later: what is kept arrives"
    );
    let o: DisplayOptions = serde_json::from_str(r#"{"console": false}"#).unwrap();
    assert!(!o.console);
    assert!(
        DisplayOptions::default().console,
        "an older page gets the console"
    );
}

#[test]
fn a_new_run_forgets_old_data_and_resends_the_dataset_list() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    push(&mut sink, 1.0, &[Value::Number(1.0)], &info(1));
    let opts = DisplayOptions::default();
    let mut sub = scope.subscribe();
    scope.frame(&opts, &mut sub).unwrap();
    let mut sink = scope.sink();
    assert!(scope
        .frame(&opts, &mut sub)
        .is_some_and(|f| decode(&f).meta.is_some()));
    push(
        &mut sink,
        0.1,
        &[Value::Number(7.0), Value::Number(8.0)],
        &info(2),
    );
    let f = decode(&scope.frame(&opts, &mut sub).unwrap());
    assert_eq!(f.meta.unwrap()["datasets"].as_array().unwrap().len(), 2);
    assert_eq!(f.blocks[0].v, vec![7.0]);
}

/// A run's pipeline thread is joined in the background, so it can still send a frame after
/// the next run started: that frame belongs to no one and is dropped.
#[test]
fn an_ending_run_cannot_write_into_the_next_one() {
    let scope = Scope::new();
    let mut old = scope.sink();
    let mut new = scope.sink();
    push(&mut new, 0.1, &[Value::Number(7.0)], &info(1));
    push(&mut old, 5.0, &[Value::Number(99.0)], &info(1));
    old.chunk(
        0,
        &Chunk {
            data: Bytes::from_static(b"old"),
            timestamp: ts(5.0),
        },
    );
    old.finish();
    assert_eq!(scope.frames(), 1);
    let f = decode(
        &scope
            .frame(&DisplayOptions::default(), &mut scope.subscribe())
            .unwrap(),
    );
    assert_eq!(f.blocks[0].v, vec![7.0]);
    assert!(f.console.is_empty(), "{:?}", f.console);
}

#[test]
fn frames_arriving_during_a_tick_are_kept_not_waited_for() {
    // Hold the state (as a slow tick would) by encoding from another thread in a loop
    // while the sink pushes: every frame must end up in the scope exactly once.
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(1);
    let reader = {
        let scope = scope.clone();
        std::thread::spawn(move || {
            let opts = DisplayOptions {
                points: 100_000,
                ..DisplayOptions::default()
            };
            let mut sub = scope.subscribe();
            for _ in 0..200 {
                let _ = scope.frame(&opts, &mut sub);
            }
        })
    };
    for i in 0..50_000 {
        push(&mut sink, i as f64 * 1e-4, &[Value::Number(i as f64)], &ds);
    }
    reader.join().unwrap();
    sink.finish();
    assert_eq!(scope.frames(), 50_000);
    let opts = DisplayOptions {
        points: 100_000,
        time_range_s: 100.0,
        ..DisplayOptions::default()
    };
    let f = decode(&scope.frame(&opts, &mut scope.subscribe()).unwrap());
    let v = &f.blocks[0].v;
    assert_eq!(v.len(), 50_000);
    assert!(
        v.iter().enumerate().all(|(i, x)| *x == i as f64),
        "in order, none lost"
    );
}

#[test]
fn options_out_of_range_are_refused_by_name() {
    let bad = [
        r#"{"refreshHz": 0}"#,
        r#"{"refreshHz": 241}"#,
        r#"{"points": 1}"#,
        r#"{"timeRangeS": -1}"#,
    ];
    for json in bad {
        let o: DisplayOptions = serde_json::from_str(json).unwrap();
        let e = o.validate().unwrap_err();
        let field = json.split('"').nth(1).unwrap();
        assert!(e.contains(field), "{e}");
    }
    let o: DisplayOptions = serde_json::from_str(r#"{"raw": {"3": 1024}}"#).unwrap();
    assert_eq!(o.raw.get(&3), Some(&1024));
    assert!(serde_json::from_str::<DisplayOptions>(r#"{"bogus": 1}"#).is_err());
}

#[test]
fn the_display_rate_is_refresh_hz_and_its_earlier_name_still_reads() {
    let o: DisplayOptions = serde_json::from_str(r#"{"refreshHz": 30}"#).unwrap();
    assert_eq!(o.refresh_hz, 30.0);
    // An older UI sends `rateHz`: the same field.
    let old: DisplayOptions = serde_json::from_str(r#"{"rateHz": 30}"#).unwrap();
    assert_eq!(old, o);
    // Written back, it has one name.
    let out = serde_json::to_value(&o).unwrap();
    assert_eq!(out["refreshHz"], 30.0);
    assert!(out.get("rateHz").is_none());
}

#[test]
fn windows_longer_than_the_raw_samples_come_from_the_overview_spikes_included() {
    let scope = Scope::new();
    let mut sink = scope.sink();
    let ds = info(1);
    // 20 s at 10 kHz: the raw window keeps the last ~6.5 s; the overview the rest.
    let rate = 10_000.0;
    let f = |i: usize| {
        if i == 60_000 {
            -500.0 // one sample at t = 6 s, long gone from the raw window
        } else {
            (i as f64 / rate).sin()
        }
    };
    for i in 0..200_000 {
        push(&mut sink, i as f64 / rate, &[Value::Number(f(i))], &ds);
    }
    let opts = DisplayOptions {
        points: 1000,
        time_range_s: 15.0,
        ..DisplayOptions::default()
    };
    let frame = decode(&scope.frame(&opts, &mut scope.subscribe()).unwrap());
    let b = &frame.blocks[0];
    assert!(b.t.len() <= 1002 && b.t.len() > 500, "{} points", b.t.len());
    assert!(b.t.windows(2).all(|w| w[0] <= w[1]), "time order");
    let now = 199_999.0 / rate;
    assert!(
        b.t[0] >= now - 15.0 && b.t[0] < now - 14.9,
        "the whole 15 s: starts at {}",
        b.t[0]
    );
    assert!(b.v.contains(&-500.0), "the old spike survives");
    for (t, v) in b.t.iter().zip(&b.v) {
        let i = (t * rate).round() as usize;
        assert_eq!(*v, f(i), "t={t}: a real sample");
    }
    // Points spread over the span like the time does (no crowding in the raw part).
    let old = b.t.iter().filter(|t| **t < now - 6.6).count() as f64 / b.t.len() as f64;
    assert!(
        (0.45..0.7).contains(&old),
        "share of points before the raw window: {old}"
    );
}
