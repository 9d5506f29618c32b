"""Build a ~1M-event chrome trace from a real trace in ../shared/traces: its steps repeated with shifted
timestamps, step numbers and ids (correlation, External id, flow id). Cached under benchmarks/.cache/."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent.parent / "shared" / "traces" / "hta" / "a100_rank3_of8_train.json.gz"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def build(target_events: int = 1_000_000, source: Path = SOURCE) -> Path:
    out = HERE / ".cache" / f"big_{target_events}.json.gz"
    if out.exists():
        return out
    if not source.exists():
        raise SystemExit(f"source trace not found: {source} (../shared/traces is absent)")
    with gzip.open(source) as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    body = [e for e in events if e.get("ph") != "M"]
    meta = [e for e in events if e.get("ph") == "M"]
    ts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    span = max(ts) - min(ts) + 1000
    ids = [e.get("args", {}).get("correlation", 0) for e in body] + [e.get("id", 0) for e in body]
    id_shift = max(i for i in ids if isinstance(i, int)) + 1
    steps = [int(m.group(1)) for e in body if (m := _STEP.match(str(e.get("name", ""))))]
    step_shift = (max(steps) - min(steps) + 1) if steps else 0
    reps = max(1, -(-target_events // len(body)))  # ceil
    out.parent.mkdir(exist_ok=True)
    tmp = out.with_suffix(".part")
    with gzip.open(tmp, "wt", compresslevel=6) as f:
        f.write('{"schemaVersion": 1, ')
        for k, v in doc.items():
            if k != "traceEvents":
                f.write(f"{json.dumps(k)}: {json.dumps(v)}, ")
        f.write('"traceEvents": [\n')
        first = True
        for e in meta:
            f.write(("" if first else ",\n") + json.dumps(e))
            first = False
        for r in range(reps):
            for e in body:
                e2 = copy.copy(e)
                if isinstance(e2.get("ts"), (int, float)):
                    e2["ts"] = e2["ts"] + r * span
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] = e2["id"] + r * id_shift
                args = e2.get("args")
                if isinstance(args, dict) and r:
                    args = dict(args)
                    for key in ("correlation", "External id"):
                        if isinstance(args.get(key), int):
                            args[key] = args[key] + r * id_shift
                    e2["args"] = args
                m = _STEP.match(str(e2.get("name", "")))
                if m and r:
                    e2["name"] = f"ProfilerStep#{int(m.group(1)) + r * step_shift}"
                f.write(("" if first else ",\n") + json.dumps(e2))
                first = False
        f.write("\n]}\n")
    tmp.rename(out)
    return out


if __name__ == "__main__":
    print(build())
