#!/usr/bin/env bash
# Seed 001's acceptance scenario on the local cluster: code versions A and B side by side on the
# shared filesystem, one job on each, both running at once with the driver on the worker node.
set -euo pipefail
argus=${ARGUS:-argus}
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/argus-multi-version.XXXXXX")"
cp -r "$here/." "$work/" && rm -rf "$work/.shared" "$work/.repo"
cd "$work"
export ARGUS_LOCAL_DIR="$work/.local-cluster"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

step argus local up; $argus local up
trap '$argus local down; rm -rf "$work"' EXIT
step ./make-repo.sh; ./make-repo.sh .repo/marker

step argus plan; $argus plan
step argus apply --auto-approve; $argus apply --auto-approve
step "argus status   # both jobs run at once"
for _ in $(seq 1 60); do
  out=$($argus status)
  [ "$(grep -c RUNNING <<<"$out")" = 2 ] && break
  sleep 1
done
echo "$out"
sleep 3
step argus logs job-a; $argus logs job-a | grep -E 'MARKER|driver'
step argus logs job-b; $argus logs job-b | grep -E 'MARKER|driver'
step "ls -l .shared/common/code/marker/*   # hard links: identical files are stored once"
ls -l .shared/common/code/marker/*
step "argus plan --verify-snapshots"; $argus plan --verify-snapshots
