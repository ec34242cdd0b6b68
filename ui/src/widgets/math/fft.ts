/** Spectrum of a dataset's newest samples: mean removed, Hann window, radix-2 FFT, one-sided
 *  amplitude in dB (a sine of amplitude A reads 20·log10(A) at its bin). A plan holds every
 *  buffer so redraws do not allocate. */

export function floorPow2(n: number): number {
  if (!(n >= 1)) return 0;
  return 2 ** Math.floor(Math.log2(n));
}

export class FftPlan {
  readonly re: Float64Array;
  readonly im: Float64Array;
  readonly window: Float64Array;
  private readonly rev: Uint32Array;
  private readonly cos: Float64Array;
  private readonly sin: Float64Array;
  private readonly windowSum: number;
  /** Bin frequencies (Hz) and amplitudes (dB) of the last `run`, n/2+1 long. */
  readonly freq: Float64Array;
  readonly db: Float64Array;

  constructor(readonly n: number) {
    if (n < 2 || floorPow2(n) !== n) throw new RangeError(`FFT size must be a power of two, got ${n}`);
    this.re = new Float64Array(n);
    this.im = new Float64Array(n);
    this.window = new Float64Array(n);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      this.window[i] = 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / n);
      sum += this.window[i];
    }
    this.windowSum = sum;
    const bits = Math.log2(n);
    this.rev = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      let r = 0;
      for (let b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
      this.rev[i] = r;
    }
    this.cos = new Float64Array(n / 2);
    this.sin = new Float64Array(n / 2);
    for (let i = 0; i < n / 2; i++) {
      this.cos[i] = Math.cos((2 * Math.PI * i) / n);
      this.sin[i] = -Math.sin((2 * Math.PI * i) / n);
    }
    this.freq = new Float64Array(n / 2 + 1);
    this.db = new Float64Array(n / 2 + 1);
  }

  /** Spectrum of the newest `n` values of `input[0..count)` (zero-padded at the front when
   *  fewer); non-finite samples count as the mean. Returns the number of bins. */
  run(input: ArrayLike<number>, count: number, sampleRateHz: number): number {
    const n = this.n;
    const take = Math.min(n, count);
    const start = count - take;
    let mean = 0, finite = 0;
    for (let i = 0; i < take; i++) {
      const x = input[start + i];
      if (Number.isFinite(x)) {
        mean += x;
        finite++;
      }
    }
    mean = finite ? mean / finite : 0;
    const pad = n - take;
    for (let i = 0; i < n; i++) {
      const x = i < pad ? mean : input[start + i - pad];
      const v = (Number.isFinite(x) ? x : mean) - mean;
      const j = this.rev[i];
      this.re[j] = v * this.window[i];
      this.im[j] = 0;
    }
    for (let size = 2; size <= n; size <<= 1) {
      const half = size >> 1, step = n / size;
      for (let i = 0; i < n; i += size) {
        for (let j = 0, k = 0; j < half; j++, k += step) {
          const a = i + j, b = a + half;
          const tr = this.re[b] * this.cos[k] - this.im[b] * this.sin[k];
          const ti = this.re[b] * this.sin[k] + this.im[b] * this.cos[k];
          this.re[b] = this.re[a] - tr;
          this.im[b] = this.im[a] - ti;
          this.re[a] += tr;
          this.im[a] += ti;
        }
      }
    }
    const bins = n / 2 + 1;
    const rate = Number.isFinite(sampleRateHz) && sampleRateHz > 0 ? sampleRateHz : 1;
    for (let k = 0; k < bins; k++) {
      const mag = Math.hypot(this.re[k], this.im[k]);
      // One-sided: double every bin except DC and Nyquist.
      const amp = ((k === 0 || k === n / 2 ? 1 : 2) * mag) / this.windowSum;
      this.freq[k] = (k * rate) / n;
      this.db[k] = 20 * Math.log10(Math.max(amp, 1e-12));
    }
    return bins;
  }
}

/** Sample rate from sample times (s): (count-1)/duration; NaN when it cannot be known. */
export function estimateRate(t: ArrayLike<number>, count: number): number {
  if (count < 2) return NaN;
  const dt = t[count - 1] - t[0];
  return Number.isFinite(dt) && dt > 0 ? (count - 1) / dt : NaN;
}

/** Index of the largest value in a[from..count). */
export function peakBin(a: ArrayLike<number>, count: number, from = 1): number {
  let best = from;
  for (let i = from; i < count; i++) if (a[i] > a[best]) best = i;
  return best;
}

/** The units of a spectrum's axes, as `FftPlan.run` computes them: frequency in Hz when the
 *  sample rate is known (else in cycles per sample, f/fs, the rate taken as 1), amplitude in
 *  dB relative to 1 of the dataset's unit (20·log10 of the amplitude, not a linear scale and
 *  not full scale). */
export function fftUnits(datasetUnits: string | null | undefined, rateKnown: boolean): { x: string; y: string } {
  const u = (datasetUnits ?? "").trim();
  return { x: rateKnown ? "Hz" : "f/fs", y: u ? `dB re 1 ${u}` : "dB" };
}
