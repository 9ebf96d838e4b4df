#!/usr/bin/env bash
# A git repository holding verl 0.5.0, 0.8.0 and 0.9.1 (tags v0.5.0, v0.8.0, v0.9.1), built from verl's published
# wheels: verl itself is never committed to argus. Needs pip (it downloads three wheels, no deps).
set -euo pipefail
repo="${1:-$(cd "$(dirname "$0")" && pwd)/.verl/verl}"
pip="${PIP:-python3 -m pip}"
work="$(mktemp -d)" && trap 'rm -rf "$work"' EXIT
rm -rf "$repo" && mkdir -p "$repo"
git() { command git -C "$repo" -c user.name=argus-example -c user.email=example@localhost "$@"; }
git init -q
for version in 0.5.0 0.8.0 0.9.1; do
  $pip download --quiet --no-deps --disable-pip-version-check "verl==$version" -d "$work/$version" 2>/dev/null
  python3 -m zipfile -e "$work/$version"/verl-*.whl "$work/$version/x"
  rm -rf "$repo/verl" && cp -r "$work/$version/x/verl" "$repo/verl"
  git add -A && git commit -qm "verl $version" && git tag "v$version"
done
echo "made $repo with tags v0.5.0, v0.8.0 and v0.9.1"
