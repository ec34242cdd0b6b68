//! The binary display frame: layout in `docs/ui-protocol.md`. Every section starts at a
//! multiple of 8 bytes so the UI maps columns as `Float64Array`s without copying.

use std::collections::VecDeque;

/// "SXD1", read as a little-endian u32.
pub const MAGIC: [u8; 4] = *b"SXD1";
pub const HEADER_BYTES: usize = 40;

/// The fixed header, decoded (for tests and tools).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameHeader {
    pub seq: u32,
    pub now: f64,
    pub datasets: u32,
    pub console: u32,
    pub meta_bytes: u32,
    pub text_bytes: u32,
    pub frames: u64,
}

pub fn decode_header(buf: &[u8]) -> Option<FrameHeader> {
    if buf.len() < HEADER_BYTES || buf[..4] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(buf[i..i + 4].try_into().unwrap());
    Some(FrameHeader {
        seq: u32_at(4),
        now: f64::from_le_bytes(buf[8..16].try_into().unwrap()),
        datasets: u32_at(16),
        console: u32_at(20),
        meta_bytes: u32_at(24),
        text_bytes: u32_at(28),
        frames: u64::from_le_bytes(buf[32..40].try_into().unwrap()),
    })
}

/// The part of a dataset's samples at or after a start time, as the ring's two slices.
pub(crate) struct Window<'a> {
    t: (&'a [f64], &'a [f64]),
    v: (&'a [f64], &'a [f64]),
    /// First visible sample.
    start: usize,
}

impl<'a> Window<'a> {
    pub fn new(t: &'a VecDeque<f64>, v: &'a VecDeque<f64>, from_t: f64) -> Window<'a> {
        let (t, v) = (t.as_slices(), v.as_slices());
        let len = t.0.len() + t.1.len();
        let at = |i: usize| {
            if i < t.0.len() {
                t.0[i]
            } else {
                t.1[i - t.0.len()]
            }
        };
        // Times only grow within a run, so the first visible sample is a binary search.
        let (mut lo, mut hi) = (0, len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if at(mid) < from_t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Window { t, v, start: lo }
    }

    fn total(&self) -> usize {
        self.t.0.len() + self.t.1.len()
    }

    fn len(&self) -> usize {
        self.total() - self.start
    }

    /// Sample `i` of the whole ring (not of the window).
    fn get(&self, i: usize) -> (f64, f64) {
        let split = self.t.0.len();
        if i < split {
            (self.t.0[i], self.v.0[i])
        } else {
            (self.t.1[i - split], self.v.1[i - split])
        }
    }
}

pub(crate) struct Encoder {
    buf: Vec<u8>,
    datasets: u32,
    console: u32,
    /// Scratch for one dataset's decimated points, reused across datasets.
    idx: Vec<usize>,
}

fn pad8(buf: &mut Vec<u8>) {
    while !buf.len().is_multiple_of(8) {
        buf.push(0);
    }
}

impl Encoder {
    pub fn new(seq: u32, now: f64, frames: u64) -> Encoder {
        let mut buf = Vec::with_capacity(64 * 1024);
        buf.extend_from_slice(&MAGIC);
        buf.extend_from_slice(&seq.to_le_bytes());
        buf.extend_from_slice(&now.to_le_bytes());
        buf.extend_from_slice(&[0; 16]); // counts, patched as sections are added
        buf.extend_from_slice(&frames.to_le_bytes());
        Encoder {
            buf,
            datasets: 0,
            console: 0,
            idx: Vec::new(),
        }
    }

    fn set_u32(&mut self, at: usize, x: u32) {
        self.buf[at..at + 4].copy_from_slice(&x.to_le_bytes());
    }

    /// The dataset list; must come before [`Encoder::text`] and any dataset.
    pub fn meta(&mut self, json: &[u8]) {
        debug_assert_eq!(self.buf.len(), HEADER_BYTES);
        self.set_u32(24, json.len() as u32);
        self.buf.extend_from_slice(json);
        pad8(&mut self.buf);
    }

    pub fn text(&mut self, json: &[u8]) {
        self.set_u32(28, json.len() as u32);
        self.buf.extend_from_slice(json);
        pad8(&mut self.buf);
    }

    /// One dataset block: its window reduced to at most `2 * buckets` points (the min and
    /// max of each bucket of equal sample count, in time order, so spikes survive) and its
    /// newest `raw` samples as they are.
    pub fn dataset(&mut self, index: u32, last: f64, w: &Window<'_>, buckets: usize, raw: usize) {
        self.idx.clear();
        let n = w.len();
        if n <= 2 * buckets {
            self.idx.extend(w.start..w.total());
        } else {
            for b in 0..buckets {
                let lo = w.start + b * n / buckets;
                let hi = (w.start + (b + 1) * n / buckets).max(lo + 1);
                let (mut imin, mut imax) = (lo, lo);
                let (mut vmin, mut vmax) = (w.get(lo).1, w.get(lo).1);
                for i in lo + 1..hi {
                    let v = w.get(i).1;
                    // NaN never wins a comparison, so a gap does not hide real extremes.
                    if v < vmin || vmin.is_nan() {
                        (imin, vmin) = (i, v);
                    }
                    if v > vmax || vmax.is_nan() {
                        (imax, vmax) = (i, v);
                    }
                }
                let (a, b) = if imin <= imax {
                    (imin, imax)
                } else {
                    (imax, imin)
                };
                self.idx.push(a);
                if b != a {
                    self.idx.push(b);
                }
            }
        }
        let raw = raw.min(w.total());
        self.buf.extend_from_slice(&index.to_le_bytes());
        self.buf
            .extend_from_slice(&(self.idx.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(&(raw as u32).to_le_bytes());
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.buf.extend_from_slice(&last.to_le_bytes());
        self.buf.reserve(8 * (2 * self.idx.len() + 2 * raw));
        for &i in &self.idx {
            self.buf.extend_from_slice(&w.get(i).0.to_le_bytes());
        }
        for &i in &self.idx {
            self.buf.extend_from_slice(&w.get(i).1.to_le_bytes());
        }
        let first_raw = w.total() - raw;
        for i in first_raw..w.total() {
            self.buf.extend_from_slice(&w.get(i).0.to_le_bytes());
        }
        for i in first_raw..w.total() {
            self.buf.extend_from_slice(&w.get(i).1.to_le_bytes());
        }
        self.datasets += 1;
    }

    pub fn console(&mut self, t: f64, source: u32, bytes: &[u8]) {
        self.buf.extend_from_slice(&t.to_le_bytes());
        self.buf.extend_from_slice(&source.to_le_bytes());
        self.buf
            .extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(bytes);
        pad8(&mut self.buf);
        self.console += 1;
    }

    pub fn finish(mut self) -> Vec<u8> {
        let (d, c) = (self.datasets, self.console);
        self.set_u32(16, d);
        self.set_u32(20, c);
        self.buf
    }
}
