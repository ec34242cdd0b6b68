//! The binary display frame: layout in `docs/ui-protocol.md`. Every section starts at a
//! multiple of 8 bytes so the UI maps columns as `Float64Array`s without copying.

use std::collections::VecDeque;

use crate::block::Block;
use crate::scope::BLOCK;

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

/// A frame's console records as `(source, bytes)`, oldest first (for tests and tools); the
/// source has [`crate::SENT`] set for bytes sent to the device. None for a frame that is
/// not one.
pub fn decode_console(buf: &[u8]) -> Option<Vec<(u32, Vec<u8>)>> {
    let h = decode_header(buf)?;
    let pad = |n: usize| (n + 7) & !7;
    let u32_at =
        |i: usize| -> Option<u32> { Some(u32::from_le_bytes(buf.get(i..i + 4)?.try_into().ok()?)) };
    let mut at = HEADER_BYTES + pad(h.meta_bytes as usize) + pad(h.text_bytes as usize);
    for _ in 0..h.datasets {
        // index, samples, raw samples, padding, last value; then four columns of f64.
        let (n, m) = (u32_at(at + 4)? as usize, u32_at(at + 8)? as usize);
        at += 24 + 16 * n + 16 * m;
    }
    let mut records = Vec::new();
    for _ in 0..h.console {
        let (source, len) = (u32_at(at + 8)?, u32_at(at + 12)? as usize);
        at += 16;
        records.push((source, buf.get(at..at + len)?.to_vec()));
        at += pad(len);
    }
    Some(records)
}

/// The part of a dataset's samples at or after a start time, as the ring's two slices.
pub(crate) struct Window<'a> {
    t: (&'a [f64], &'a [f64]),
    v: (&'a [f64], &'a [f64]),
    /// First visible sample.
    start: usize,
    /// The overview blocks over the same samples, when known: a bucket of many samples
    /// takes the extremes of the whole blocks inside it from there.
    blocks: Option<Blocks<'a>>,
}

/// Overview blocks located among a dataset's samples: block `k` of the deque holds samples
/// `(first + k) * BLOCK ..` of the run, and the raw ring's first sample is sample
/// `ring_first` of the run.
struct Blocks<'a> {
    blocks: &'a VecDeque<Block>,
    first: u64,
    ring_first: u64,
}

/// The first minimum and the first maximum found so far, as ring indices, with the rule
/// every min/max of the display keeps: NaN never wins over a number (a gap does not hide
/// real extremes), and among NaNs only the last stands.
struct Extremes {
    imin: usize,
    vmin: f64,
    imax: usize,
    vmax: f64,
}

impl Extremes {
    fn at(i: usize, v: f64) -> Extremes {
        Extremes {
            imin: i,
            vmin: v,
            imax: i,
            vmax: v,
        }
    }

    fn add(&mut self, (imin, vmin): (usize, f64), (imax, vmax): (usize, f64)) {
        if vmin < self.vmin || self.vmin.is_nan() {
            (self.imin, self.vmin) = (imin, vmin);
        }
        if vmax > self.vmax || self.vmax.is_nan() {
            (self.imax, self.vmax) = (imax, vmax);
        }
    }

    fn scan(&mut self, w: &Window<'_>, from: usize, to: usize) {
        for i in from..to {
            let v = w.get(i).1;
            self.add((i, v), (i, v));
        }
    }
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
        Window {
            t,
            v,
            start: lo,
            blocks: None,
        }
    }

    /// The same window, knowing the overview `blocks` over its samples: whole blocks first
    /// at sample `first_block * BLOCK` of the run, and the ring's first sample at sample
    /// `ring_first` of the run.
    pub fn with_blocks(
        mut self,
        blocks: &'a VecDeque<Block>,
        first_block: u64,
        ring_first: u64,
    ) -> Window<'a> {
        self.blocks = Some(Blocks {
            blocks,
            first: first_block,
            ring_first,
        });
        self
    }

    /// Ring indices of the first minimum and the first maximum of samples `lo..hi` (see
    /// [`Extremes`]), exactly as reading every sample finds them. Why blocks: at 100 k
    /// frames/s a bucket of a 10 s plot holds thousands of samples, and a display tick read
    /// all 65 536 raw samples of every dataset for a few dozen points; whole blocks inside
    /// a bucket give their extremes (and where they are) at once, so only the bucket's
    /// ragged ends are read sample by sample.
    fn extremes(&self, lo: usize, hi: usize) -> (usize, usize) {
        let mut acc = Extremes::at(lo, self.get(lo).1);
        let mut i = lo + 1;
        if let Some(b) = &self.blocks {
            let size = BLOCK as u64;
            let first = (b.ring_first + i as u64).div_ceil(size);
            let end = (b.ring_first + hi as u64) / size;
            let kept = b.first..=b.first + b.blocks.len() as u64;
            // Two blocks or more, all of them kept: otherwise reading is as quick.
            if end >= first + 2 && kept.contains(&first) && kept.contains(&end) {
                acc.scan(self, i, (first * size - b.ring_first) as usize);
                for k in first..end {
                    let block = b.blocks[(k - b.first) as usize];
                    let start = (k * size - b.ring_first) as usize;
                    acc.add(
                        (start + block.kmin as usize, block.vmin),
                        (start + block.kmax as usize, block.vmax),
                    );
                }
                i = (end * size - b.ring_first) as usize;
            }
        }
        acc.scan(self, i, hi);
        (acc.imin, acc.imax)
    }

    fn total(&self) -> usize {
        self.t.0.len() + self.t.1.len()
    }

    /// Time of the oldest sample still kept (visible or not).
    pub fn first_time(&self) -> Option<f64> {
        (self.total() > 0).then(|| self.get(0).0)
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

/// The overview blocks that are visible (at or after the window's start) and older than
/// the oldest raw sample: the part of a window the raw samples no longer cover.
pub(crate) struct Overview<'a> {
    blocks: (&'a [Block], &'a [Block]),
    start: usize,
    end: usize,
}

impl<'a> Overview<'a> {
    pub fn new(blocks: &'a VecDeque<Block>, from_t: f64, raw_from: Option<f64>) -> Overview<'a> {
        let blocks = blocks.as_slices();
        let len = blocks.0.len() + blocks.1.len();
        let at = |i: usize| {
            if i < blocks.0.len() {
                blocks.0[i]
            } else {
                blocks.1[i - blocks.0.len()]
            }
        };
        let first = |pred: &dyn Fn(&Block) -> bool| {
            let (mut lo, mut hi) = (0, len);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if pred(&at(mid)) {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            lo
        };
        let start = first(&|b| b.t0 >= from_t);
        let end = match raw_from {
            Some(raw) => first(&|b| b.t1 >= raw),
            None => 0,
        };
        Overview {
            blocks,
            start,
            end: end.max(start),
        }
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    fn get(&self, i: usize) -> Block {
        let split = self.blocks.0.len();
        if i < split {
            self.blocks.0[i]
        } else {
            self.blocks.1[i - split]
        }
    }
}

/// Min and max of each of `buckets` equal-count buckets of the window's samples.
fn decimate_samples(w: &Window<'_>, buckets: usize, out: &mut Vec<(f64, f64)>) {
    let n = w.len();
    if n <= 2 * buckets {
        out.extend((w.start..w.total()).map(|i| w.get(i)));
        return;
    }
    for b in 0..buckets {
        let lo = w.start + b * n / buckets;
        let hi = (w.start + (b + 1) * n / buckets).max(lo + 1);
        let (imin, imax) = w.extremes(lo, hi);
        let (a, b) = if imin <= imax {
            (imin, imax)
        } else {
            (imax, imin)
        };
        out.push(w.get(a));
        if b != a {
            out.push(w.get(b));
        }
    }
}

/// The same over overview blocks: each bucket's lowest minimum and highest maximum.
fn decimate_blocks(o: &Overview<'_>, buckets: usize, out: &mut Vec<(f64, f64)>) {
    let n = o.len();
    let buckets = buckets.min(n).max(1);
    for b in 0..buckets {
        let lo = o.start + b * n / buckets;
        let hi = (o.start + (b + 1) * n / buckets).max(lo + 1);
        let mut acc = o.get(lo);
        for i in lo + 1..hi {
            let x = o.get(i);
            if x.vmin < acc.vmin || acc.vmin.is_nan() {
                (acc.tmin, acc.vmin) = (x.tmin, x.vmin);
            }
            if x.vmax > acc.vmax || acc.vmax.is_nan() {
                (acc.tmax, acc.vmax) = (x.tmax, x.vmax);
            }
        }
        let (first, second) = if acc.tmin <= acc.tmax {
            ((acc.tmin, acc.vmin), (acc.tmax, acc.vmax))
        } else {
            ((acc.tmax, acc.vmax), (acc.tmin, acc.vmin))
        };
        out.push(first);
        if second.0 != first.0 {
            out.push(second);
        }
    }
}

pub(crate) struct Encoder {
    buf: Vec<u8>,
    datasets: u32,
    console: u32,
    /// Scratch for one dataset's decimated points, reused across datasets.
    points: Vec<(f64, f64)>,
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
            points: Vec::new(),
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

    /// One dataset block: its window reduced to about `2 * buckets` points (the min and
    /// max of each bucket, in time order, so spikes survive) – from the overview for the
    /// part older than the raw samples, buckets shared by time span – and its newest `raw`
    /// samples as they are. `span`: (buckets, window length in seconds); no buckets sends
    /// no window, only the newest value and the raw samples.
    pub fn dataset(
        &mut self,
        index: u32,
        last: f64,
        overview: &Overview<'_>,
        w: &Window<'_>,
        (buckets, span_s): (usize, f64),
        raw: usize,
    ) {
        self.points.clear();
        let mut raw_buckets = buckets;
        if buckets == 0 {
            // Nothing drawn from this dataset's window.
        } else if overview.len() > 0 {
            let old_from = overview.get(overview.start).t0;
            let old_to = w.first_time().unwrap_or(old_from);
            let share = ((old_to - old_from) / span_s.max(f64::MIN_POSITIVE)).clamp(0.0, 1.0);
            let old_buckets = ((buckets as f64 * share).round() as usize).clamp(1, buckets);
            raw_buckets = buckets.saturating_sub(old_buckets).max(1);
            decimate_blocks(overview, old_buckets, &mut self.points);
        }
        if buckets > 0 {
            decimate_samples(w, raw_buckets, &mut self.points);
        }
        let raw = raw.min(w.total());
        let n = self.points.len();
        self.buf.extend_from_slice(&index.to_le_bytes());
        self.buf.extend_from_slice(&(n as u32).to_le_bytes());
        self.buf.extend_from_slice(&(raw as u32).to_le_bytes());
        self.buf.extend_from_slice(&0u32.to_le_bytes());
        self.buf.extend_from_slice(&last.to_le_bytes());
        self.buf.reserve(8 * (2 * n + 2 * raw));
        for &(t, _) in &self.points {
            self.buf.extend_from_slice(&t.to_le_bytes());
        }
        for &(_, v) in &self.points {
            self.buf.extend_from_slice(&v.to_le_bytes());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::Series;

    /// A run's samples of one kind: `kind` picks numbers, ties, gaps or nothing but gaps.
    fn series(pushed: usize, kind: &str) -> Series {
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut s = Series::default();
        for i in 0..pushed {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = (x >> 11) as f64 / (1u64 << 53) as f64;
            let v = match kind {
                "noise" => r - 0.5,
                // Few levels: every bucket's extremes tie many times.
                "ties" => (r * 4.0).floor(),
                // Runs of gaps longer than a block, between noisy stretches.
                "gaps" if (i / 700) % 3 == 1 => f64::NAN,
                "gaps" => r,
                "all gaps" => f64::NAN,
                _ => i as f64,
            };
            // Times repeat in pairs, as frames of one chunk can share a time.
            s.push((i / 2) as f64 * 1e-5, v);
        }
        s
    }

    #[test]
    fn extremes_from_blocks_are_the_samples_a_reading_finds() {
        for pushed in [1_000, WINDOW + 12_345, 300_001] {
            for kind in ["noise", "ties", "gaps", "all gaps", "rising"] {
                let s = series(pushed, kind);
                let fast = s.window(f64::NEG_INFINITY);
                let read = Window::new(&s.t, &s.v, f64::NEG_INFINITY);
                let n = read.total();
                let mut x = 12_345_u64;
                let mut ranges = vec![(0, n), (1, n), (0, 1), (n - 1, n)];
                for _ in 0..3_000 {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let lo = (x >> 33) as usize % n;
                    let len = 1 + (x >> 13) as usize % (n - lo).min(6_000);
                    ranges.push((lo, lo + len));
                }
                for (lo, hi) in ranges {
                    assert_eq!(
                        fast.extremes(lo, hi),
                        read.extremes(lo, hi),
                        "{pushed} samples of {kind}, samples {lo}..{hi}"
                    );
                }
            }
        }
    }

    /// The rows above would pass with blocks never read: a block's extremes, changed behind
    /// the samples' back, must show up in a long bucket.
    #[test]
    fn a_long_bucket_takes_whole_blocks_from_the_overview() {
        let mut s = series(WINDOW + 12_345, "noise");
        let k = s.overview.len() - 40;
        s.overview[k].vmin = -1e9;
        s.overview[k].kmin = 7;
        let w = s.window(f64::NEG_INFINITY);
        let ring_first = (WINDOW + 12_345 - w.total()) as u64;
        let blocks_first = ((WINDOW + 12_345) / BLOCK - s.overview.len()) as u64;
        let changed = ((blocks_first + k as u64) * BLOCK as u64 - ring_first) as usize + 7;
        let (imin, _) = w.extremes(changed - 3_000, changed + 3_000);
        assert_eq!(imin, changed);
    }

    const WINDOW: usize = crate::scope::WINDOW_SAMPLES;
}
