//! Series storage and display decimation.
//!
//! Each numeric dataset keeps a fixed-capacity ring of `(time, value)` pairs in two
//! columns (ready to hand to a plot as typed arrays). Long windows are reduced for display
//! by min/max per bucket (keeps every spike visible) or LTTB (keeps the shape with fewer
//! points).

/// A fixed-capacity ring of samples; the oldest sample is overwritten when full.
#[derive(Debug, Clone)]
pub struct Ring {
    t: Vec<f64>,
    v: Vec<f64>,
    /// Index the next sample goes to.
    head: usize,
    len: usize,
}

impl Ring {
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring {
            t: vec![0.0; capacity],
            v: vec![0.0; capacity],
            head: 0,
            len: 0,
        }
    }

    pub fn capacity(&self) -> usize {
        self.t.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    pub fn push(&mut self, t: f64, v: f64) {
        self.t[self.head] = t;
        self.v[self.head] = v;
        self.head += 1;
        if self.head == self.t.len() {
            self.head = 0;
        }
        self.len = (self.len + 1).min(self.t.len());
    }

    /// The newest sample.
    pub fn last(&self) -> Option<(f64, f64)> {
        if self.len == 0 {
            return None;
        }
        let i = (self.head + self.t.len() - 1) % self.t.len();
        Some((self.t[i], self.v[i]))
    }

    /// The samples oldest-first as (older part, newer part) of each column, without copying.
    #[allow(clippy::type_complexity)]
    pub fn slices(&self) -> ((&[f64], &[f64]), (&[f64], &[f64])) {
        let cap = self.t.len();
        let start = (self.head + cap - self.len) % cap;
        if start + self.len <= cap {
            let r = start..start + self.len;
            ((&self.t[r.clone()], &self.v[r]), (&[], &[]))
        } else {
            let first = start..cap;
            let second = 0..self.head;
            (
                (&self.t[first.clone()], &self.v[first]),
                (&self.t[second.clone()], &self.v[second]),
            )
        }
    }

    /// Copies the samples oldest-first into two columns.
    pub fn to_columns(&self) -> (Vec<f64>, Vec<f64>) {
        let ((t1, v1), (t2, v2)) = self.slices();
        ([t1, t2].concat(), [v1, v2].concat())
    }
}

/// Reduces `(t, v)` to at most `2 * buckets` points: the min and the max of each bucket of
/// equal sample count, in time order. Spikes survive, whatever the zoom.
pub fn decimate_min_max(t: &[f64], v: &[f64], buckets: usize) -> (Vec<f64>, Vec<f64>) {
    let n = t.len().min(v.len());
    if buckets == 0 || n <= 2 * buckets {
        return (t[..n].to_vec(), v[..n].to_vec());
    }
    let mut out_t = Vec::with_capacity(2 * buckets);
    let mut out_v = Vec::with_capacity(2 * buckets);
    for b in 0..buckets {
        let lo = b * n / buckets;
        let hi = ((b + 1) * n / buckets).max(lo + 1);
        let (mut imin, mut imax) = (lo, lo);
        for i in lo..hi {
            // NaN never wins a comparison, so gaps do not hide real extremes.
            if v[i] < v[imin] || v[imin].is_nan() {
                imin = i;
            }
            if v[i] > v[imax] || v[imax].is_nan() {
                imax = i;
            }
        }
        let (first, second) = if imin <= imax {
            (imin, imax)
        } else {
            (imax, imin)
        };
        out_t.push(t[first]);
        out_v.push(v[first]);
        if second != first {
            out_t.push(t[second]);
            out_v.push(v[second]);
        }
    }
    (out_t, out_v)
}

/// Largest-Triangle-Three-Buckets (Steinarsson 2013): `threshold` points that keep the
/// visual shape. The first and last points are always kept.
pub fn lttb(t: &[f64], v: &[f64], threshold: usize) -> (Vec<f64>, Vec<f64>) {
    let n = t.len().min(v.len());
    if threshold >= n || threshold < 3 {
        return (t[..n].to_vec(), v[..n].to_vec());
    }
    let mut out_t = Vec::with_capacity(threshold);
    let mut out_v = Vec::with_capacity(threshold);
    out_t.push(t[0]);
    out_v.push(v[0]);
    let every = (n - 2) as f64 / (threshold - 2) as f64;
    let mut a = 0usize;
    for i in 0..threshold - 2 {
        let avg_lo = ((i + 1) as f64 * every) as usize + 1;
        let avg_hi = (((i + 2) as f64 * every) as usize + 1).min(n);
        let (mut avg_t, mut avg_v) = (0.0, 0.0);
        let count = (avg_hi.saturating_sub(avg_lo)).max(1) as f64;
        for j in avg_lo..avg_hi {
            avg_t += t[j];
            avg_v += v[j];
        }
        avg_t /= count;
        avg_v /= count;
        let lo = (i as f64 * every) as usize + 1;
        let hi = ((i + 1) as f64 * every) as usize + 1;
        let (mut best, mut best_area) = (lo, -1.0);
        for j in lo..hi.min(n - 1) {
            let area = ((t[a] - avg_t) * (v[j] - v[a]) - (t[a] - t[j]) * (avg_v - v[a])).abs();
            if area > best_area {
                best_area = area;
                best = j;
            }
        }
        out_t.push(t[best]);
        out_v.push(v[best]);
        a = best;
    }
    out_t.push(t[n - 1]);
    out_v.push(v[n - 1]);
    (out_t, out_v)
}

/// One ring per dataset, indexed like the pipeline's datasets.
#[derive(Debug, Clone)]
pub struct SeriesStore {
    rings: Vec<Ring>,
    capacity: usize,
}

impl SeriesStore {
    pub fn new(datasets: usize, capacity: usize) -> Self {
        SeriesStore {
            rings: (0..datasets)
                .map(|_| Ring::with_capacity(capacity))
                .collect(),
            capacity,
        }
    }

    /// Appends one frame's numeric values at time `t` (text that reads as a number counts,
    /// see [`crate::Value::as_f64`]); other text and `Null` are skipped.
    pub fn push_frame(&mut self, t: f64, values: &[crate::Value]) {
        if values.len() > self.rings.len() {
            let cap = self.capacity;
            self.rings
                .resize_with(values.len(), || Ring::with_capacity(cap));
        }
        for (ring, value) in self.rings.iter_mut().zip(values) {
            if let Some(n) = value.as_f64() {
                ring.push(t, n);
            }
        }
    }

    pub fn ring(&self, dataset: usize) -> Option<&Ring> {
        self.rings.get(dataset)
    }

    pub fn len(&self) -> usize {
        self.rings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rings.is_empty()
    }

    pub fn clear(&mut self) {
        self.rings.iter_mut().for_each(Ring::clear);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_wraps_and_keeps_order() {
        let mut r = Ring::with_capacity(3);
        for i in 0..5 {
            r.push(i as f64, (i * 10) as f64);
        }
        assert_eq!(r.len(), 3);
        assert_eq!(
            r.to_columns(),
            (vec![2.0, 3.0, 4.0], vec![20.0, 30.0, 40.0])
        );
        assert_eq!(r.last(), Some((4.0, 40.0)));
    }

    #[test]
    fn min_max_keeps_spikes() {
        let t: Vec<f64> = (0..10_000).map(|i| i as f64).collect();
        let mut v = vec![0.0; 10_000];
        v[4321] = 99.0;
        v[7777] = -42.0;
        let (dt, dv) = decimate_min_max(&t, &v, 100);
        assert!(dv.len() <= 200);
        assert!(dv.contains(&99.0) && dv.contains(&-42.0));
        assert!(dt.windows(2).all(|w| w[0] < w[1]), "time order kept");
    }

    #[test]
    fn lttb_keeps_ends_and_peak() {
        let t: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        let v: Vec<f64> = t
            .iter()
            .map(|x| if *x == 500.0 { 100.0 } else { 0.0 })
            .collect();
        let (dt, dv) = lttb(&t, &v, 50);
        assert_eq!(dt.len(), 50);
        assert_eq!((dt[0], *dt.last().unwrap()), (0.0, 999.0));
        assert!(dv.contains(&100.0));
    }
}
