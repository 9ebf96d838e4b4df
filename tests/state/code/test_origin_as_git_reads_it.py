"""The origin read as data (state.code.gitinfo.origin_url: no git runs over a checkout anyone may write) is the one
git reports, for the configs git accepts: comments, a section name in capitals, two urls (the first is the remote's). An
`insteadOf` rewrite is git's to apply: `argus init` asks git itself for its own checkout's origin."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from state.code.gitinfo import origin_url

CASES = {
    "inline comment": '[remote "origin"]\n\turl = https://github.com/o/r.git # mirror\n',
    "section name in capitals": '[Remote "origin"]\n\turl = https://github.com/o/r.git\n',
    "comment after a quoted value": '[remote "origin"]\n\turl = "https://github.com/o/r.git" ; old\n',
    "two urls": '[remote "origin"]\n\turl = https://github.com/o/old.git\n\turl = https://github.com/o/r.git\n',
}


@pytest.mark.parametrize("config", CASES.values(), ids=list(CASES))
def test_origin_read_as_data_is_the_origin_git_reports(tmp_path: Path, config: str):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    with open(tmp_path / ".git" / "config", "a") as handle:
        handle.write(config)
    git = subprocess.run(["git", "-C", str(tmp_path), "remote", "get-url", "origin"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert origin_url(tmp_path) == git
