//! Percentiles of a stream in bounded memory: exact while the values fit a budget, then
//! estimated from a histogram on the floats' own bits.
//!
//! Exact percentiles use linear interpolation between the two nearest ranks (rank
//! `(n − 1)·q`), as pandas' `quantile` and numpy's `percentile` do by default.
//!
//! Past the budget, every value kept so far and every later one is counted in a histogram
//! whose bins are the top [`KEY_BITS`] bits of the float's order-preserving bit pattern:
//! the sign, the exponent and the first 12 bits of the mantissa, so a bin is 1/4096 of an
//! octave wide and a percentile read from it (interpolated by rank inside its bin) is
//! within [`ESTIMATE_RELATIVE_ERROR`] of the true value, for values of any magnitude and
//! sign. The bins live in pages, one per octave and sign the values reach (4 096 counters,
//! 16 KiB), allocated when first used: an array index per value, not a map lookup, which
//! is what makes an hour of 16 datasets at 1 kHz take well under a second. At most
//! [`MAX_PAGES`] pages are kept (1 MiB); values in any further octave are counted per
//! octave only, and a percentile that falls there is only known to its octave (the
//! result says the percentiles are estimated either way). Hand-written rather than a
//! sketch crate: it is short, and its error bound is this plain one.

/// Bits of a float's order-preserving pattern that name its histogram bin.
pub const KEY_BITS: u32 = 24;
const SHIFT: u32 = 64 - KEY_BITS;
/// Bits of a key that choose the bin within its page (the rest choose the page).
const SLOT_BITS: u32 = 12;
const SLOTS: usize = 1 << SLOT_BITS;
const PAGES: usize = 1 << (KEY_BITS - SLOT_BITS);

/// Octave pages kept at most per histogram.
pub const MAX_PAGES: usize = 64;

/// The largest relative error of an estimated percentile: one bin's width.
pub const ESTIMATE_RELATIVE_ERROR: f64 = 1.0 / 4096.0;

/// The ordered key of a finite float: `a < b` exactly when `key(a) < key(b)`.
#[inline]
fn ordered(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn unordered(key: u64) -> f64 {
    if key >> 63 == 1 {
        f64::from_bits(key & !(1 << 63))
    } else {
        f64::from_bits(!key)
    }
}

/// The histogram past the budget.
#[derive(Debug, Clone)]
struct Pages {
    /// Page index → its index in `pages`, or `u16::MAX` when it has none.
    index: Vec<u16>,
    /// The page counted last and its index in `pages` (`usize::MAX`: none).
    last: (usize, usize),
    /// Counts of 32 bits keep a page at 16 KiB, in a core's first-level cache with room to
    /// spare; a count that would pass `u32::MAX` goes on in `overflow`.
    pages: Vec<Box<[u32; SLOTS]>>,
    overflow: std::collections::HashMap<usize, u64>,
    /// Per page: values counted only per octave (its page was not allocated).
    coarse: Vec<u64>,
}

impl Pages {
    fn new() -> Pages {
        Pages {
            index: vec![u16::MAX; PAGES],
            last: (usize::MAX, usize::MAX),
            pages: Vec::new(),
            overflow: std::collections::HashMap::new(),
            coarse: vec![0; PAGES],
        }
    }

    fn add(&mut self, x: f64) {
        self.add_key((ordered(x) >> SHIFT) as usize, 1);
    }

    /// Counts one value of bin `key`: two loads and a store when its page exists and the
    /// count has room, which is what nearly every value finds. Everything else (a new page,
    /// a count at `u32::MAX`, a page past [`MAX_PAGES`]) is [`Pages::add_key`]'s.
    #[inline]
    fn add_one(&mut self, key: usize) {
        let (page, slot) = (key >> SLOT_BITS, key & (SLOTS - 1));
        if let Some(&at) = self.index.get(page) {
            if let Some(p) = self.pages.get_mut(at as usize) {
                let count = &mut p[slot];
                if *count < u32::MAX {
                    *count += 1;
                    return;
                }
            }
        }
        self.add_key(key, 1);
    }

    #[inline]
    fn add_key(&mut self, key: usize, n: u64) {
        let (page, slot) = (key >> SLOT_BITS, key & (SLOTS - 1));
        // Values mostly stay in one octave: its page is the one counted last.
        if page == self.last.0 {
            if let Some(p) = self.pages.get_mut(self.last.1) {
                let sum = u64::from(p[slot]) + n;
                if let Ok(c) = u32::try_from(sum) {
                    p[slot] = c;
                    return;
                }
            }
        }
        let mut at = self.index[page];
        if at == u16::MAX && self.pages.len() < MAX_PAGES {
            at = self.pages.len() as u16;
            self.index[page] = at;
            self.pages.push(Box::new([0; SLOTS]));
        }
        self.last = (page, at as usize);
        match self.pages.get_mut(at as usize) {
            Some(p) => {
                let sum = u64::from(p[slot]) + n;
                match u32::try_from(sum) {
                    Ok(c) => p[slot] = c,
                    Err(_) => {
                        p[slot] = 0;
                        *self.overflow.entry(key).or_default() += sum;
                    }
                }
            }
            None => self.coarse[page] += n,
        }
    }
}

/// Finite values, kept for their percentiles.
#[derive(Debug, Clone)]
pub struct Quantiles {
    exact: Vec<f64>,
    pages: Option<Pages>,
    /// Consecutive values in one bin, counted before they reach the pages
    /// ([`Quantiles::push_repeating`]): the intervals of a steady clock cost a comparison
    /// each.
    run: (usize, u64),
    budget: usize,
    n: u64,
}

impl Quantiles {
    /// Keeps up to `budget` values exactly.
    pub fn new(budget: usize) -> Quantiles {
        Quantiles {
            exact: Vec::new(),
            pages: None,
            run: (0, 0),
            budget,
            n: 0,
        }
    }

    /// Adds a finite value (the caller counts non-finite ones apart). For values that
    /// seldom fall in the bin of the one before, such as readings: each is counted at once.
    #[inline]
    pub fn push(&mut self, x: f64) {
        debug_assert!(x.is_finite());
        self.n += 1;
        if let Some(pages) = &mut self.pages {
            pages.add_one((ordered(x) >> SHIFT) as usize);
        } else if self.exact.len() < self.budget {
            self.exact.push(x);
        } else {
            self.start_pages(x);
        }
    }

    /// [`Quantiles::push`] for values that mostly repeat the bin of the one before, such as
    /// the intervals of a steady clock: a run of one bin is counted once, when it ends.
    /// Counting commutes, so the two may be mixed.
    #[inline]
    pub fn push_repeating(&mut self, x: f64) {
        debug_assert!(x.is_finite());
        self.n += 1;
        if self.pages.is_some() {
            let key = (ordered(x) >> SHIFT) as usize;
            if key == self.run.0 {
                self.run.1 += 1;
            } else {
                self.end_run(key);
            }
        } else if self.exact.len() < self.budget {
            self.exact.push(x);
        } else {
            self.start_pages(x);
        }
    }

    /// Counts the run that a value of another bin ends, and starts that bin's. Out of line
    /// so that [`Quantiles::push_repeating`] stays small enough to inline.
    #[inline(never)]
    fn end_run(&mut self, key: usize) {
        if let Some(pages) = &mut self.pages {
            if self.run.1 > 0 {
                pages.add_key(self.run.0, self.run.1);
            }
        }
        self.run = (key, 1);
    }

    /// Past the budget: everything kept so far goes into the histogram, and so does `x`.
    #[cold]
    #[inline(never)]
    fn start_pages(&mut self, x: f64) {
        let mut pages = Pages::new();
        for v in std::mem::take(&mut self.exact) {
            pages.add(v);
        }
        pages.add(x);
        self.pages = Some(pages);
    }

    /// Takes in the values of `other` (a later part of the same stream): the budgets add
    /// up, so parts that each kept their values exactly stay exact together.
    pub fn merge(&mut self, other: Quantiles) {
        self.budget += other.budget;
        self.n += other.n;
        if self.pages.is_none()
            && other.pages.is_none()
            && self.exact.len() + other.exact.len() <= self.budget
        {
            self.exact.extend(other.exact);
            return;
        }
        let pages = self.pages.get_or_insert_with(Pages::new);
        for v in std::mem::take(&mut self.exact) {
            pages.add(v);
        }
        if self.run.1 > 0 {
            pages.add_key(self.run.0, self.run.1);
        }
        self.run = (0, 0);
        for v in other.exact {
            pages.add(v);
        }
        if let Some(theirs) = other.pages {
            if other.run.1 > 0 {
                pages.add_key(other.run.0, other.run.1);
            }
            for (page, &at) in theirs.index.iter().enumerate() {
                let Some(p) = theirs.pages.get(at as usize) else {
                    continue;
                };
                for (slot, &count) in p.iter().enumerate() {
                    if count > 0 {
                        pages.add_key((page << SLOT_BITS) | slot, u64::from(count));
                    }
                }
            }
            for (key, count) in theirs.overflow {
                pages.add_key(key, count);
            }
            for (page, &count) in theirs.coarse.iter().enumerate() {
                pages.coarse[page] += count;
            }
        }
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether [`Quantiles::finish`] will give exact values.
    pub fn is_exact(&self) -> bool {
        self.pages.is_none()
    }

    /// Sorts what it kept, for the reads below.
    pub fn finish(self) -> Sorted {
        let Some(mut pages) = self.pages else {
            let mut v = self.exact;
            v.sort_unstable_by(f64::total_cmp);
            return Sorted::Exact(v);
        };
        if self.run.1 > 0 {
            pages.add_key(self.run.0, self.run.1);
        }
        let mut bins = Vec::new();
        let mut total = 0u64;
        for page in 0..PAGES {
            let first = (page as u64) << SLOT_BITS;
            if pages.coarse[page] > 0 {
                // Counted per octave: where in it is unknown, so it spans the whole page.
                total += pages.coarse[page];
                bins.push(Bin {
                    keys: (first, first + SLOTS as u64),
                    count: pages.coarse[page],
                    upto: total,
                });
            }
            let Some(p) = pages.pages.get(pages.index[page] as usize) else {
                continue;
            };
            for (slot, &small) in p.iter().enumerate() {
                let key = first + slot as u64;
                let count =
                    u64::from(small) + pages.overflow.get(&(key as usize)).copied().unwrap_or(0);
                if count == 0 {
                    continue;
                }
                total += count;
                bins.push(Bin {
                    keys: (key, key + 1),
                    count,
                    upto: total,
                });
            }
        }
        // Coarse and fine bins of one page overlap; order by where each starts.
        bins.sort_by_key(|b| b.keys.0);
        let mut upto = 0;
        for b in &mut bins {
            upto += b.count;
            b.upto = upto;
        }
        Sorted::Estimated(bins)
    }
}

/// Histogram bins in key order.
#[derive(Debug, Clone, Copy)]
pub struct Bin {
    /// The keys it covers, `start..end`.
    keys: (u64, u64),
    count: u64,
    /// Values in this bin and every bin before it.
    upto: u64,
}

/// Kept values, ready to be read.
#[derive(Debug, Clone)]
pub enum Sorted {
    Exact(Vec<f64>),
    Estimated(Vec<Bin>),
}

impl Sorted {
    fn len(&self) -> u64 {
        match self {
            Sorted::Exact(v) => v.len() as u64,
            Sorted::Estimated(bins) => bins.last().map_or(0, |b| b.upto),
        }
    }

    /// The value of rank `r` (0-based, `r < len`).
    fn rank(&self, r: u64) -> f64 {
        match self {
            Sorted::Exact(v) => v[r as usize],
            Sorted::Estimated(bins) => {
                let i = bins.partition_point(|b| b.upto <= r);
                let b = bins[i];
                let below = b.upto - b.count;
                let low = unordered(b.keys.0 << SHIFT);
                // The bin's upper edge: the last pattern before the next bin's first.
                let high = unordered((b.keys.1 << SHIFT).wrapping_sub(1));
                let (low, high) = if low <= high {
                    (low, high)
                } else {
                    (high, low)
                };
                let within = ((r - below) as f64 + 0.5) / b.count as f64;
                low + (high - low) * within
            }
        }
    }

    /// The `q` quantile (0 ≤ q ≤ 1) by linear interpolation, pandas' default.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.len();
        if n == 0 {
            return None;
        }
        let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
        let lo = h.floor() as u64;
        let hi = (lo + 1).min(n - 1);
        let (a, b) = (self.rank(lo), self.rank(hi));
        Some(a + (b - a) * (h - lo as f64))
    }

    /// How many kept values are greater than `x` (to a bin when estimated).
    pub fn count_above(&self, x: f64) -> u64 {
        match self {
            Sorted::Exact(v) => (v.len() - v.partition_point(|y| *y <= x)) as u64,
            Sorted::Estimated(bins) => {
                let key = ordered(x) >> SHIFT;
                let upto = bins.partition_point(|b| b.keys.0 <= key);
                self.len() - if upto == 0 { 0 } else { bins[upto - 1].upto }
            }
        }
    }

    pub fn is_exact(&self) -> bool {
        matches!(self, Sorted::Exact(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numpy_linear(sorted: &[f64], q: f64) -> f64 {
        let h = (sorted.len() - 1) as f64 * q;
        let lo = h.floor() as usize;
        let hi = (lo + 1).min(sorted.len() - 1);
        sorted[lo] + (sorted[hi] - sorted[lo]) * (h - lo as f64)
    }

    #[test]
    fn order_preserving_keys() {
        let xs = [
            -1e300, -3.5, -1.0, -1e-300, -0.0, 0.0, 1e-300, 1.0, 2.0, 1e300,
        ];
        for w in xs.windows(2) {
            assert!(ordered(w[0]) <= ordered(w[1]), "{w:?}");
            assert_eq!(unordered(ordered(w[0])).to_bits(), w[0].to_bits());
        }
    }

    #[test]
    fn exact_matches_linear_interpolation() {
        let values: Vec<f64> = (0..1001)
            .map(|i| ((i * 7919) % 1001) as f64 * 0.5 - 100.0)
            .collect();
        let mut q = Quantiles::new(10_000);
        values.iter().for_each(|v| q.push(*v));
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let s = q.finish();
        assert!(s.is_exact());
        for p in [0.0, 0.05, 0.5, 0.95, 0.999, 1.0] {
            assert_eq!(s.quantile(p), Some(numpy_linear(&sorted, p)), "p{p}");
        }
        assert_eq!(
            s.count_above(0.0),
            sorted.iter().filter(|v| **v > 0.0).count() as u64
        );
    }

    #[test]
    fn past_the_budget_stays_within_the_stated_error() {
        // Values of both signs across many octaves, more than the budget.
        let values: Vec<f64> = (0..200_000)
            .map(|i| {
                let x = (i as f64 * 0.618_033_988_75).fract();
                (x - 0.3) * 10f64.powi((i % 7) - 3)
            })
            .collect();
        let mut q = Quantiles::new(1000);
        values.iter().for_each(|v| q.push(*v));
        assert!(!q.is_exact());
        let s = q.finish();
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        for p in [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99] {
            let want = numpy_linear(&sorted, p);
            let got = s.quantile(p).unwrap();
            assert!(
                (got - want).abs() <= want.abs() * ESTIMATE_RELATIVE_ERROR * 1.01 + 1e-300,
                "p{p}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn octaves_past_the_pages_are_still_counted() {
        // Every value in its own octave: more octaves than pages.
        let mut q = Quantiles::new(0);
        for i in 0..(MAX_PAGES as i32 + 40) {
            q.push(2f64.powi(i - 60));
        }
        let s = q.finish();
        assert_eq!(s.len(), MAX_PAGES as u64 + 40);
        let median = s.quantile(0.5).unwrap();
        let want = 2f64.powi((MAX_PAGES as i32 + 39) / 2 - 60);
        assert!(
            median >= want * 0.5 && median <= want * 2.0,
            "{median} vs {want}"
        );
    }

    /// Readings counted one by one and intervals counted in runs are one histogram: the
    /// same values either way, or mixed, give the same percentiles.
    #[test]
    fn counted_one_by_one_or_in_runs_the_percentiles_are_the_same() {
        // Past a budget of 100: steady stretches (runs) between values that jump around.
        let values: Vec<f64> = (0..50_000)
            .map(|i| {
                if (i / 500) % 2 == 0 {
                    0.001
                } else {
                    ((i * 7919) % 10_007) as f64 * 0.37 - 900.0
                }
            })
            .collect();
        let (mut one, mut runs, mut mixed) = (
            Quantiles::new(100),
            Quantiles::new(100),
            Quantiles::new(100),
        );
        for (i, &v) in values.iter().enumerate() {
            one.push(v);
            runs.push_repeating(v);
            if i % 3 == 0 {
                mixed.push(v)
            } else {
                mixed.push_repeating(v)
            }
        }
        let (one, runs, mixed) = (one.finish(), runs.finish(), mixed.finish());
        assert!(!one.is_exact());
        for p in [0.0, 0.05, 0.25, 0.5, 0.95, 1.0] {
            assert_eq!(one.quantile(p), runs.quantile(p), "p{p}");
            assert_eq!(one.quantile(p), mixed.quantile(p), "p{p}");
        }
        assert_eq!(one.count_above(0.001), runs.count_above(0.001));
    }

    #[test]
    fn empty_has_no_quantile() {
        assert_eq!(Quantiles::new(10).finish().quantile(0.5), None);
    }
}
