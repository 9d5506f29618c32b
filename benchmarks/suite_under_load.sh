#!/usr/bin/env bash
# The README's test command three times in a row beside two busy processes (issue 45 item 14, issue 49 item 4): a
# clean clone of this checkout's HEAD (with ../shared beside it where this checkout has one), the README's test setup
# command, then `python -m pytest -q` three times while two `python -c` loops keep both cores busy. The loops are
# bounded in time and ended by pid, on any exit too. Run it with nothing else on the machine: ~20-25 min a run on
# 2 cores. Usage, from the repository's root: benchmarks/suite_under_load.sh [OUT_DIR]  (default /tmp/autoprof-under-load)
set -u
here=$(git rev-parse --show-toplevel) || exit 1
out=${1:-/tmp/autoprof-under-load}
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d)
git clone -q "$here" "$work/autoprof" && cd "$work/autoprof" || exit 1
[ -d "$here/../shared" ] && ln -s "$(cd "$here/../shared" && pwd)" "$work/shared"
git log --oneline -1 | tee "$out/commit"
busy='import time
t = time.time() + 7200
while time.time() < t: pass'
python3 -c "$busy" & b1=$!
python3 -c "$busy" & b2=$!
trap 'kill $b1 $b2 2>/dev/null' EXIT TERM INT
{ command -v chromium >/dev/null || { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/dev/null; } &&
    python3 -m venv .venv && . .venv/bin/activate && pip install -q "torch==2.13.0" numpy -e '.[test]' || exit 1
for i in 1 2 3; do
    echo "== run $i $(date -u)  $(uptime)"
    python -m pytest -q >"$out/run$i.out" 2>&1
    echo "== run $i rc=$?  $(tail -1 "$out/run$i.out")"
done
