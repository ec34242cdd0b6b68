"""The reference for the data.* analysis tests: the same figures computed by pandas, numpy
and SciPy from a session's CSV export.

Usage: python data_reference.py EXPORT.csv REQUEST.json -> JSON on stdout.

REQUEST: {"summary": [column, ...],
          "find": [{"column": c, "condition": {...}}, ...],
          "spectrum": [{"column": c, "segment": n, "peaks": k}, ...]}

A sample is a non-empty cell; a cell that float() cannot read is text; NaN and infinities
are non-finite; the rest are the numbers. Times are the export's elapsed_s.
"""

import json
import sys

import numpy as np
import pandas as pd
from scipy import signal


def parse(cell):
    try:
        return float(cell)
    except ValueError:
        return None


def samples(df, column):
    raw = df[column]
    present = raw != ""
    t = df["elapsed_s"][present].astype(float).to_numpy()
    parsed = [parse(c) for c in raw[present]]
    is_text = np.array([p is None for p in parsed], dtype=bool)
    x = np.array([np.nan if p is None else p for p in parsed], dtype=float)
    return t, x, is_text


def summary(df, column):
    t, x, is_text = samples(df, column)
    finite = np.isfinite(x)
    numbers = pd.Series(x[finite])
    tn = t[finite]
    out = {
        "count": int(finite.sum()),
        "text": int(is_text.sum()),
        "nonFinite": int((~finite & ~is_text).sum()),
        "firstS": float(t[0]),
        "lastS": float(t[-1]),
        "min": float(numbers.min()),
        "minAtS": float(tn[int(numbers.to_numpy().argmin())]),
        "max": float(numbers.max()),
        "maxAtS": float(tn[int(numbers.to_numpy().argmax())]),
        "mean": float(numbers.mean()),
        "std": float(numbers.std()),
        "p5": float(numbers.quantile(0.05)),
        "p50": float(numbers.quantile(0.5)),
        "p95": float(numbers.quantile(0.95)),
        "rateHz": float((len(t) - 1) / (t[-1] - t[0])),
    }
    intervals = pd.Series(np.diff(t))
    typical = float(intervals.median())
    out["typicalIntervalS"] = typical
    out["gaps"] = int((intervals > 3 * typical).sum()) if typical > 0 else 0
    out["longestGapS"] = float(intervals.max())
    out["longestGapEndS"] = float(t[int(intervals.to_numpy().argmax()) + 1])
    return out


def find(df, column, condition):
    t, x, _ = samples(df, column)
    finite = np.isfinite(x)
    kind = condition["kind"]
    if kind == "above":
        meets = finite & (x > condition["level"])
    elif kind == "below":
        meets = finite & (x < condition["level"])
    elif kind == "between":
        meets = finite & (x >= condition["low"]) & (x <= condition["high"])
    elif kind == "stuck":
        # Runs of equal finite values (a non-finite or text sample ends a run).
        ranges = []
        run_id = (pd.Series(x) != pd.Series(x).shift()).cumsum()
        frame = pd.DataFrame({"t": t, "x": x, "run": run_id, "finite": finite})
        for _, g in frame[frame.finite].groupby("run"):
            if len(g) >= 2 and g.t.iloc[-1] - g.t.iloc[0] >= condition["forS"]:
                v = float(g.x.iloc[0])
                ranges.append({"startS": float(g.t.iloc[0]), "endS": float(g.t.iloc[-1]),
                               "samples": len(g), "min": v, "max": v})
        return ranges
    elif kind == "crossing":
        ranges = []
        level = condition["level"]
        prev = None
        for ti, xi, fi in zip(t, x, finite):
            if not fi:
                prev = None
                continue
            if prev is not None and (prev >= level) != (xi >= level):
                ranges.append({"startS": float(ti), "endS": float(ti), "samples": 1,
                               "min": float(xi), "max": float(xi),
                               "direction": "up" if xi >= level else "down"})
            prev = xi
        return ranges
    else:
        raise SystemExit(f"unknown condition {kind}")
    runs = (pd.Series(meets) != pd.Series(meets).shift()).cumsum()
    frame = pd.DataFrame({"t": t, "x": x, "run": runs, "meets": meets})
    ranges = []
    for _, g in frame[frame.meets].groupby("run"):
        ranges.append({"startS": float(g.t.iloc[0]), "endS": float(g.t.iloc[-1]),
                       "samples": len(g), "min": float(g.x.min()), "max": float(g.x.max())})
    return ranges


def spectrum(df, column, segment, peaks):
    t, x, _ = samples(df, column)
    finite = np.isfinite(x)
    t, x = t[finite], x[finite]
    fs = (len(x) - 1) / (t[-1] - t[0])
    nperseg = min(segment, len(x))
    f, p = signal.welch(x, fs=fs, window="hann", nperseg=nperseg, noverlap=nperseg // 2,
                        detrend="constant", scaling="spectrum")
    idx, _ = signal.find_peaks(p)
    idx = sorted(idx, key=lambda i: -p[i])[:peaks]
    return {
        "sampleRateHz": float(fs),
        "segments": int((len(x) - nperseg) // (nperseg - nperseg // 2) + 1),
        "peaks": [{"frequencyHz": float(f[i]), "power": float(p[i]),
                   "amplitude": float(np.sqrt(2 * p[i]))} for i in idx],
    }


def main():
    df = pd.read_csv(sys.argv[1], dtype=str, keep_default_na=False)
    with open(sys.argv[2]) as f:
        request = json.load(f)
    out = {
        "summary": {c: summary(df, c) for c in request.get("summary", [])},
        "find": [find(df, q["column"], q["condition"]) for q in request.get("find", [])],
        "spectrum": [spectrum(df, q["column"], q["segment"], q["peaks"])
                     for q in request.get("spectrum", [])],
    }
    json.dump(out, sys.stdout)


main()
