"""Steps several commands share: load the desired state, check the addresses an option names. (Connecting,
observing and planning, which the loop shares too, are reconcile.execute.cycle's.)"""

from __future__ import annotations

from pathlib import Path

from reconcile.model import PlanOptions
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.loader import load_workspace


def load(directory: Path) -> DesiredState:
    return load_workspace(directory)


def check_addresses(desired: DesiredState, options: PlanOptions) -> None:
    """--target and --replace must name things that exist: a typo must not mean "nothing"."""
    known = {f"job.{n}" for n in desired.jobs} | {f"code.{n}" for n in desired.snapshots}
    for flag, addresses, allowed in (("--target", options.targets, known),
                                     ("--replace", options.replace, {a for a in known if a.startswith("job.")})):
        unknown = sorted(set(addresses) - allowed)
        if unknown:
            raise ArgusError(f"{flag} {', '.join(unknown)}: no such address. Known: {', '.join(sorted(allowed))}")
