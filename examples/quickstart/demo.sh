#!/usr/bin/env bash
# The quickstart, end to end on the embedded local cluster: plan, apply, watch, plan again.
set -euo pipefail
cd "$(dirname "$0")"
argus=${ARGUS:-argus}
export ARGUS_LOCAL_DIR="$PWD/.shared/.local-cluster"
step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

rm -rf .shared
step argus local up
$argus local up
trap '$argus local down' EXIT

# Until code snapshots exist, the jobs' code is copied to the shared user-code directory.
mkdir -p .shared/user/code && cp code/*.py .shared/user/code/

step argus validate; $argus validate
step argus plan; $argus plan
step argus apply --auto-approve; $argus apply --auto-approve

step "argus status (until every run has finished)"
for _ in $(seq 1 120); do
  out=$($argus status)
  grep -qE 'PENDING|RUNNING' <<<"$out" || break
  sleep 1
done
echo "$out"

step argus logs train-linear; $argus logs train-linear
step argus logs where-am-i; $argus logs where-am-i
step "argus plan (again)"; $argus plan --detailed-exitcode
step "tail of the audit log"; tail -n 4 .shared/.argus/audit/quickstart.jsonl
