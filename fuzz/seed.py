"""Seed inputs for a fuzz target, made from the test fixtures: `seed.py TARGET DIR`.

Each target reads its input its own way (see the comment at the top of its file); the
seeds below are written in that shape so the fuzzer starts from inputs the product meets.
"""
import glob, json, os, struct, sys

target, out = sys.argv[1], sys.argv[2]
fixtures = "fixtures/telemetry"
load = lambda name: json.load(open(os.path.join(fixtures, name)))
bytes_of = lambda s: bytes.fromhex(s[4:]) if s.startswith("hex:") else s.encode()
escapes = {"n": b"\n", "r": b"\r", "t": b"\t", "0": b"\0", "\\": b"\\"}


def delimiter(text, fmt):
    if fmt == "hex":
        return bytes.fromhex("".join(t.removeprefix("0x") for t in text.replace(",", " ").split()))
    out, i = b"", 0
    while i < len(text):
        if text[i] != "\\":
            out, i = out + text[i].encode(), i + 1
        elif text[i + 1] in "xX":
            out, i = out + bytes.fromhex(text[i + 2:i + 4]), i + 4
        else:
            out, i = out + escapes[text[i + 1]], i + 2
    return out


def sse_bodies():
    """Every recorded provider reply, as the bytes the scripted server sends."""
    for path in sorted(glob.glob("fixtures/providers/**/*.json", recursive=True)):
        doc = json.load(open(path))
        for turn in doc.get("turns", []) if isinstance(doc, dict) else []:
            items = turn.get("sse") or []
            body = ""
            for item in items:
                if "raw" in item:
                    body += item["raw"]
                    continue
                data = item["data"] if isinstance(item["data"], str) else json.dumps(item["data"])
                body += (f"event: {item['event']}\n" if item.get("event") else "") + f"data: {data}\n\n"
            if turn.get("crlf"):
                body = body.replace("\n", "\r\n")
            if body:
                yield body.encode()


def texts():
    """Untrusted text the assistant meets: chat messages, tool results, memory facts."""
    found = []
    for path in sorted(glob.glob("fixtures/injection/*.json")) + sorted(glob.glob("fixtures/assistant/long-chats/*.json")):
        def walk(v):
            if isinstance(v, str) and 8 <= len(v) <= 4000:
                found.append(v)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)
        walk(json.load(open(path)))
    return found[:200]


seeds = []
if target == "framing":
    modes = ["endOnly", "startEnd", "startOnly", "none"]
    checksums = ["none", "xor8", "mod256", "crc8", "crc16", "crc16-modbus", "crc16-ccitt",
                 "fletcher16", "crc32", "adler32"]
    for case in load("framing.json"):
        f = case["framing"]
        fmt = f.get("delimiterFormat", "text")
        start = delimiter(f.get("start", ""), fmt) or b"$"
        end = delimiter(f["end"][0], fmt) if f.get("end") else b"\n"
        stream = b"".join(bytes_of(c) for c in case["chunks"])
        if not 1 <= len(start) <= 3 or not 1 <= len(end) <= 3:
            continue  # the target only builds delimiters of 1 to 3 bytes
        limit = min(255, (f.get("maxFrameBytes", 65536) - 1 + 3) // 4)
        header = bytes([modes.index(f.get("mode", "endOnly")), checksums.index(f.get("checksum", "none")),
                        len(start) - 1, len(end) - 1, limit, len(stream) // 2])
        seeds.append(header + start + end + stream)
elif target == "sse":
    # The first byte picks where the body is cut.
    seeds = [bytes([n % 256]) + body for n, body in enumerate(sse_bodies())]
elif target in ("envelope", "chatlog_fold"):
    # Structured inputs (`arbitrary`): the fuzzer decodes these bytes into fields, so
    # real texts give it real words, tags and characters to recombine.
    seeds = [t.encode() for t in texts()]
elif target == "project_patch":
    # Three bytes pick the project, the kind of object and which one; the rest is the patch.
    schema = json.load(open("docs/project.schema.json"))
    defs = schema.get("$defs") or schema["definitions"]
    for kind, name in enumerate(["Source", "Group", "Dataset", "Action", "Workspace"]):
        for field, spec in defs[name]["properties"].items():
            if field == "id":
                continue
            for value in [None, spec.get("default"), (spec.get("enum") or [None])[-1], "x", 0, {}]:
                seeds.append(bytes([kind, kind, 0]) + json.dumps({field: value}).encode())
elif target == "capture_reader":
    # Serial Studio's captures as Sextant capture records (the first byte, even, asks the
    # target for the magic).
    for path in sorted(glob.glob("fixtures/serial-studio/*.capture")):
        data = open(path, "rb").read()
        records = b"".join(
            struct.pack("<HQqI", 0, i * 1000, 1_700_000_000_000_000_000 + i, len(chunk)) + chunk
            for i, chunk in enumerate(data[j:j + 64] for j in range(0, len(data), 64)))
        seeds += [b"\x00" + records, b"\x00" + records[:-7]]
elif target == "session_values":
    # Rows of Serial Studio's expected values, as a session stores them.
    for path in sorted(glob.glob("fixtures/serial-studio/*.expected.json")):
        for row in json.load(open(path)).get("rows", []):
            blob = b""
            for v in row:
                if v is None:
                    blob += b"\x00"
                elif isinstance(v, (int, float)):
                    blob += b"\x01" + struct.pack("<d", float(v))
                else:
                    t = str(v).encode()
                    blob += b"\x02" + struct.pack("<I", len(t)) + t
            seeds.append(blob)
else:
    # Parsers, decoders and checksums take any bytes: every payload the fixtures know.
    seeds = [bytes_of(c["input"]) for c in load("checksums.json")] if target == "checksums" else []
    seeds += [bytes_of(i) for case in load("parsers.json") for i in case["inputs"]]
for n, seed in enumerate(dict.fromkeys(seeds)):
    with open(os.path.join(out, f"seed-{n:03}"), "wb") as f:
        f.write(seed)
