"""Reads Sextant's exports back with tools nobody here wrote, for crates/export's tests.

    read_back.py mcap FILE            -> JSON: per topic, the messages read by the `mcap`
                                         package (PyPI), their numeric sums and raw bytes;
                                         the file's metadata and attachments
    read_back.py parquet FILE CSV     -> JSON: pyarrow's schema of FILE and whether its rows
                                         equal the CSV export pandas reads
"""

import json
import math
import sys


def fnv1a(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_mcap(path):
    import base64
    from mcap.reader import make_reader

    topics = {}
    last_time = -1
    in_order = True
    with open(path, "rb") as f:
        reader = make_reader(f)
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            if message.log_time < last_time:
                in_order = False
            last_time = message.log_time
            t = topics.setdefault(
                channel.topic,
                {
                    "schema": schema.name if schema else None,
                    "schemaEncoding": schema.encoding if schema else None,
                    "messageEncoding": channel.message_encoding,
                    "messages": 0,
                    "sums": {},
                    "counts": {},
                    "texts": 0,
                    "nulls": 0,
                    "rawBytes": 0,
                    "rawHash": 0xCBF29CE484222325,
                },
            )
            t["messages"] += 1
            body = json.loads(message.data)
            if "data" in body and len(body) == 1:
                raw = base64.b64decode(body["data"])
                t["rawBytes"] += len(raw)
                t["rawHash"] = fnv1a(raw, t["rawHash"])
                continue
            for key, value in body.items():
                if key == "elapsed_s":
                    continue
                if value is None:
                    t["nulls"] += 1
                elif isinstance(value, str):
                    t["texts"] += 1
                else:
                    t["sums"][key] = t["sums"].get(key, 0.0) + float(value)
                    t["counts"][key] = t["counts"].get(key, 0) + 1
        f.seek(0)
        reader = make_reader(f)
        metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        f.seek(0)
        reader = make_reader(f)
        attachments = {
            a.name: {"mediaType": a.media_type, "data": json.loads(a.data)}
            for a in reader.iter_attachments()
        }
    for t in topics.values():
        t["rawHash"] = format(t["rawHash"], "016x")
    return {
        "topics": topics,
        "inOrder": in_order,
        "metadata": metadata,
        "attachments": attachments,
    }


def read_parquet(path, csv_path):
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    schema = {f.name: str(f.type) for f in table.schema}
    frame = table.to_pandas()
    # The CSV's header as written (pandas would rename a repeated name its own way); in
    # Parquet a repeated name becomes `name (2)`, `name (3)`…, after `time`.
    import csv as csv_module

    with open(csv_path, newline="", encoding="utf-8") as f:
        header = next(csv_module.reader(f))
    names = ["time"]
    for name in header:
        unique, n = name, 2
        while unique in names:
            unique, n = f"{name} ({n})", n + 1
        names.append(unique)
    # Text stays text: the CSV is read without guessing types, then compared per column.
    csv = pd.read_csv(csv_path, dtype=str, keep_default_na=False, header=0, names=names[1:])
    problems = []
    if list(frame.columns) != names:
        problems.append(f"columns {list(frame.columns)} against {names}")
    if len(frame) != len(csv):
        problems.append(f"{len(frame)} rows against {len(csv)}")
    if not problems:
        for name in csv.columns:
            ours = frame[name]
            theirs = csv[name]
            if schema[name] == "double":
                expected = np.array(
                    [float(x) if x != "" else np.nan for x in theirs], dtype=float
                )
                got = ours.to_numpy(dtype=float)
                if name == "elapsed_s":
                    # The CSV prints microseconds.
                    bad = ~np.isclose(got, expected, rtol=0, atol=6e-7)
                else:
                    # The CSV prints 15 significant digits.
                    bad = ~(
                        np.isclose(got, expected, rtol=1e-14, atol=0)
                        | (np.isnan(got) & np.isnan(expected))
                    )
                if bad.any():
                    i = int(np.argmax(bad))
                    problems.append(f"{name} row {i}: {got[i]!r} against {theirs.iloc[i]!r}")
            else:
                got = ["" if v is None else v for v in ours.tolist()]
                if got != theirs.tolist():
                    i = next(k for k, (a, b) in enumerate(zip(got, theirs)) if a != b)
                    problems.append(f"{name} row {i}: {got[i]!r} against {theirs.iloc[i]!r}")
        times = frame["time"]
        start = times.iloc[0]
        since = (times - start).dt.total_seconds().to_numpy()
        if not np.allclose(since, frame["elapsed_s"].to_numpy(), rtol=0, atol=1e-6):
            problems.append("time and elapsed_s disagree")
    metadata = {
        k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()
    }
    return {
        "schema": schema,
        "rows": len(frame),
        "rowGroups": pq.ParquetFile(path).num_row_groups,
        "problems": problems,
        "session": json.loads(metadata.get("sextant.session", "null")),
    }


if __name__ == "__main__":
    if sys.argv[1] == "mcap":
        out = read_mcap(sys.argv[2])
    else:
        out = read_parquet(sys.argv[2], sys.argv[3])
    json.dump(out, sys.stdout, allow_nan=True)
