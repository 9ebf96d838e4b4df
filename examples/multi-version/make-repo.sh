#!/usr/bin/env bash
# A git repository with a marker module at two commits, tagged v1 and v2 (seed 001's codeA/codeB).
set -euo pipefail
repo="${1:-$(dirname "$0")/.repo/marker}"
rm -rf "$repo" && mkdir -p "$repo" && cd "$repo"
git init -q
git() { command git -c user.name=argus-example -c user.email=example@localhost "$@"; }
cat > show_marker.py <<'PY'
"""Print which code version this job runs (mvp_marker.MARKER), where, then hold a while."""
import argparse, os, time

import mvp_marker

parser = argparse.ArgumentParser()
parser.add_argument("--hold", type=float, default=0)
hold = parser.parse_args().hold
print(f"MARKER={mvp_marker.MARKER} from {os.path.dirname(mvp_marker.__file__)}", flush=True)
print(f"driver node role: {os.environ.get('ARGUS_LOCAL_NODE', 'unknown')}", flush=True)
time.sleep(hold)
PY
echo 'MARKER = "codeA"' > mvp_marker.py
git add -A && git commit -qm "marker A" && git tag v1
echo 'MARKER = "codeB"' > mvp_marker.py
git commit -qam "marker B" && git tag v2
echo "made $repo with tags v1 (codeA) and v2 (codeB)"
