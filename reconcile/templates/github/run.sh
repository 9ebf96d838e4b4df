#!/usr/bin/env bash
# argus in CI: one entry point per moment of a pull request's life. Writes its outputs to $OUT_DIR.
#   run.sh plan  DIR   validate, save the plan (plan.json) and a PR comment body (comment.md)
#   run.sh apply DIR   apply the saved plan $OUT_DIR/plan.json, refusing a stale one
#   run.sh drift DIR   a scheduled check: exit 0 in sync, 2 drifted (comment.md says how), 1 error
# The comment starts with a marker naming the workspace, so the workflow updates one comment per
# pull request instead of adding one per push.
set -uo pipefail
mode="${1:?plan|apply|drift}"
dir="${2:-.}"
out="${OUT_DIR:-argus-out}"
argus="${ARGUS:-argus}"
mkdir -p "$out"
marker="<!-- argus-plan: ${dir} -->"

comment() {  # header + body; GitHub refuses comments over 65,536 characters (argus keeps plans under 60,000)
  { echo "$marker"; cat; } > "$out/comment.md"
}

case "$mode" in
  plan)
    if ! "$argus" validate "$dir" > "$out/validate.txt" 2>&1; then
      { echo "### argus validate failed"; echo; echo '```'; cat "$out/validate.txt"; echo '```'; } | comment
      exit 1
    fi
    "$argus" plan "$dir" -o "$out/plan.json" --format markdown > "$out/plan.md" 2> "$out/plan.err"
    code=$?
    { cat "$out/plan.md"; [ -s "$out/plan.err" ] && { echo; echo '```'; cat "$out/plan.err"; echo '```'; }; } | comment
    exit "$code"
    ;;
  apply)
    "$argus" apply "$out/plan.json" --dir "$dir"
    ;;
  drift)
    "$argus" plan "$dir" --detailed-exitcode --format markdown > "$out/plan.md" 2> "$out/plan.err"
    code=$?
    comment < "$out/plan.md"
    exit "$code"
    ;;
  *)
    echo "unknown mode $mode: use plan, apply or drift" >&2
    exit 1
    ;;
esac
