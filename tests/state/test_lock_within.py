"""state.files.lock_within, the one wait for a record lock (the audit log, the admission lock, the runs
index): held when free, given up when another process keeps it, and NFS's ENOLCK as each caller wants."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from state import files
from state.files import lock_within

HOLD = "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); " \
       "print('held', flush=True); time.sleep(30)"


def test_a_free_lock_is_held_and_a_held_one_is_given_up_after_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "x.lock"
    path.touch()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        fd = os.open(path, os.O_RDWR)
        try:
            started = time.monotonic()
            assert lock_within(fd, 0.3, unlocked_ok=True) is False
            assert 0.3 <= time.monotonic() - started < 5
        finally:
            os.close(fd)
    finally:
        holder.kill()
        holder.wait()
    fd = os.open(path, os.O_RDWR)
    try:
        assert lock_within(fd, 0.3, unlocked_ok=False) is True
    finally:
        os.close(fd)


def test_no_lock_manager_is_the_callers_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_lock_manager(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(files.fcntl, "lockf", no_lock_manager)
    fd = os.open(tmp_path / "x.lock", os.O_RDWR | os.O_CREAT)
    try:
        assert lock_within(fd, 5, unlocked_ok=True) is True
        started = time.monotonic()
        with pytest.raises(OSError) as raised:
            lock_within(fd, 5, unlocked_ok=False)
        assert raised.value.errno == errno.ENOLCK and time.monotonic() - started < 1  # refused at once, not waited
    finally:
        os.close(fd)
