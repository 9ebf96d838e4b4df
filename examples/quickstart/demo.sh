#!/usr/bin/env bash
# The quickstart end to end on the embedded local cluster: plan, apply, watch, plan again, then a
# second run that resumes from the first run's checkpoint. Works on a copy: the repo is untouched.
set -euo pipefail
argus=${ARGUS:-argus}
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/argus-quickstart.XXXXXX")"
cp -r "$here/." "$work/" && rm -rf "$work/.shared"
cd "$work"
export ARGUS_LOCAL_DIR="$work/.local-cluster"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
wait_finished() {
  for _ in $(seq 1 180); do
    out=$($argus status) && ! grep -qE 'PENDING|RUNNING' <<<"$out" && break
    sleep 1
  done
  echo "$out"
}

step argus local up
$argus local up
trap '$argus local down; rm -rf "$work"' EXIT

# The desired state lives in git: the audit log records the commit each apply came from.
git init -q && git add -A && git -c user.name=demo -c user.email=demo@localhost commit -qm "quickstart"

# These jobs' helper code sits in the shared user-code directory (seed 001's user_code_path);
# examples/multi-version shows versioned code snapshots instead.
mkdir -p .shared/user/code && cp code/*.py .shared/user/code/

step argus validate; $argus validate
step argus plan; $argus plan
step argus apply --auto-approve; $argus apply --auto-approve
step "argus status   # until every run has finished"; wait_finished
step argus logs train-linear; $argus logs train-linear
step argus logs where-am-i; $argus logs where-am-i
step "argus plan   # again"; $argus plan --detailed-exitcode

step "# ask for a second, longer run: bump run: and the step count"
sed -i -e 's/^name: train-linear$/name: train-linear\nrun: 2/' -e 's/--steps=200/--steps=300/' jobs/train.yaml
git -c user.name=demo -c user.email=demo@localhost commit -qam "train-linear: a second run, 300 steps"
$argus plan
step argus apply --auto-approve; $argus apply --auto-approve
wait_finished >/dev/null
step "argus logs train-linear   # resumes from the first run's checkpoint"; $argus logs train-linear
step "argus plan   # and again"; $argus plan --detailed-exitcode
step "tail -n 3 .shared/.argus/audit/quickstart.jsonl"; tail -n 3 .shared/.argus/audit/quickstart.jsonl
