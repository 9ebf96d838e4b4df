#!/usr/bin/env bash
# argus in CI: one entry point per moment of a pull request's life. Writes its outputs to $OUT_DIR.
#   run.sh workspaces DIR the workspaces under DIR as JSON (workspaces.json), the matrix of the jobs below;
#                         with $CHANGED_FROM, only those changed since its merge base with DIR's HEAD
#   run.sh plan     DIR   validate, save the plan (plan.json) and a PR comment body (comment.md)
#   run.sh validate DIR   validate only (pull requests from forks, on a GitHub-hosted runner)
#   run.sh apply    DIR   apply the saved plan $OUT_DIR/plan.json, refusing a stale one
#   run.sh drift    DIR   a scheduled check: exit 0 in sync, 2 drifted (comment.md says how), 1 error
# DIR holds the workspace's files; for a pull request they are data, never run. $ARGUS is the pinned
# argus (the action installs it from requirements.txt). The comment starts with a marker naming the
# workspace ($ARGUS_WORKSPACE, relative to the repository root), so one comment per pull request is
# updated in place instead of one added per push.
set -uo pipefail
mode="${1:?workspaces|plan|validate|apply|drift}"
dir="${2:-.}"
out="${OUT_DIR:-argus-out}"
argus="${ARGUS:-argus}"
# A directory's name is the pull request's: it can neither close the HTML comment nor span two lines.
marker="<!-- argus-plan: $(printf '%s' "${ARGUS_WORKSPACE:-$dir}" | tr -d '\r\n' | sed -e 's/--/-\&#45;/g' -e 's/>/\&gt;/g') -->"

mkdir -p "$out"
if [ "$mode" != apply ]; then  # a self-hosted runner keeps its work directory: never pass on an older run's files
  rm -f "$out/plan.json" "$out/plan.md" "$out/plan.err" "$out/comment.md" "$out/validate.txt" \
        "$out/workspaces.json" "$out/found.json"
fi

pre() {  # argus's own text, HTML-escaped in <pre>: a file name can't close a code fence and become markdown
  echo '<pre>'; sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/`/\&#96;/g'; echo '</pre>'
}

comment() {  # header + body; GitHub refuses comments over 65,536 characters (argus keeps plans under 60,000)
  { echo "$marker"; cat; } > "$out/comment.md"
}

validated() {
  "$argus" validate "$dir" > "$out/validate.txt" 2>&1 && return 0
  { echo "### argus validate failed"; echo; pre < "$out/validate.txt"; } | comment
  return 1
}

case "$mode" in
  workspaces)  # the matrix of the jobs that follow: argus reads the tree and git's history as data
    case "${CHANGED_FROM:-}" in
      *[!0]* | "") ;;
      *) echo "::error::this push has no commit before it (a new branch): no change to list; plan by hand." >&2
         exit 1 ;;
    esac
    "$argus" workspaces "$dir" ${CHANGED_FROM:+--changed-from "$CHANGED_FROM"} --json > "$out/found.json" || exit 1
    # A workspace whose argus.yaml the change deleted has nothing to plan or apply: a notice, not a job.
    python3 - "$out/found.json" "$out/workspaces.json" <<'PY' || exit 1
import json, sys
rows = json.load(open(sys.argv[1]))
for row in rows:
    if row.get("removed"):
        print(f"::notice::{json.dumps(row['dir'])}: its argus.yaml was deleted; argus no longer plans it, "
              "and its runs are left as they are.")
json.dump([row for row in rows if not row.get("removed")], open(sys.argv[2], "w"))
PY
    ;;
  plan)
    validated || exit 1
    "$argus" plan "$dir" -o "$out/plan.json" --format markdown > "$out/plan.md" 2> "$out/plan.err"
    code=$?
    { cat "$out/plan.md"; [ -s "$out/plan.err" ] && { echo; pre < "$out/plan.err"; }; } | comment
    exit "$code"
    ;;
  validate)
    validated || exit 1
    { echo "### argus validate passed"; echo
      echo "Pull requests from forks are validated, never planned: plans run on a runner that reaches the"
      echo "cluster, which only branches of this repository get (docs/ci.md)."; } | comment
    ;;
  apply)
    "$argus" apply "$out/plan.json" --dir "$dir"
    ;;
  drift)
    "$argus" plan "$dir" --detailed-exitcode --format markdown > "$out/plan.md" 2> "$out/plan.err"
    code=$?
    { cat "$out/plan.md"; [ -s "$out/plan.err" ] && { echo; pre < "$out/plan.err"; }; } | comment
    exit "$code"
    ;;
  *)
    echo "unknown mode $mode: use workspaces, plan, validate, apply or drift" >&2
    exit 1
    ;;
esac
