//! One overview block: the min/max summary of consecutive samples that both the scope
//! (which builds blocks as samples arrive) and the encoder (which draws windows from them)
//! read. Its own module so neither of those depends on the other for it.

/// The extremes of [`BLOCK`](crate::scope::BLOCK) consecutive samples: what min/max decimation keeps of them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Block {
    /// Times of the first and last sample.
    pub t0: f64,
    pub t1: f64,
    pub tmin: f64,
    pub vmin: f64,
    pub tmax: f64,
    pub vmax: f64,
    /// Where the minimum and the maximum are among the block's samples (0 is its first), so
    /// a window of raw samples can take a whole block's extremes instead of reading its
    /// samples, and still name the very samples a reading would have found.
    pub kmin: u16,
    pub kmax: u16,
    /// Samples added so far.
    n: u16,
}

impl Block {
    pub(crate) fn new(t: f64, v: f64) -> Block {
        Block {
            t0: t,
            t1: t,
            tmin: t,
            vmin: v,
            tmax: t,
            vmax: v,
            kmin: 0,
            kmax: 0,
            n: 1,
        }
    }

    /// Samples in the block so far.
    pub(crate) fn len(&self) -> usize {
        self.n as usize
    }

    pub(crate) fn add(&mut self, t: f64, v: f64) {
        let k = self.n;
        self.n += 1;
        self.t1 = t;
        // NaN never wins a comparison, so a gap does not hide real extremes.
        if v < self.vmin || self.vmin.is_nan() {
            (self.tmin, self.vmin, self.kmin) = (t, v, k);
        }
        if v > self.vmax || self.vmax.is_nan() {
            (self.tmax, self.vmax, self.kmax) = (t, v, k);
        }
    }
}
