"""In one `argus serve A B`, a workspace's jobs read only that workspace's own variables.

A job's `${env:NAME}` is read from the serve process's environment, and one process serving several
workspaces holds every team's variables side by side. Each workspace lists what its jobs may read in its
own `secrets:` (specs.job_secrets), but that list is the team's own file: team A could list B's variable
and its jobs would receive B's value. So in a shared serve the lists must not overlap:

- at start, a variable in two served workspaces' lists is refused (exit 1, naming both lines), unless the
  operator, who exports the values, declares it shared with `--shared-secret NAME`: the teams then
  receive one value of it knowingly (a team-wide HF_TOKEN);
- while serving (a merge changes a list), a workspace whose list newly names a variable another served
  workspace lists is refused for the turn (nothing of it is planned or applied) and the one that listed
  it first keeps it: a merge in A's repository can never take B's variable, nor stop B's loop.

The operator's flag is the only authority, as the operator alone holds the values: neither team's git can
say a variable is shared. (Variables argus holds for itself are refused in every list anyway:
specs.held_variables.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from specs import held_variables
from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.reading import WORKSPACE_FILE

SHARED_OPTION = "--shared-secret"


@dataclass
class SecretLists:
    """Each served workspace's accepted `secrets:` list; disjoint but for the operator's shared names."""

    shared: frozenset[str] = frozenset()
    _lists: dict[str, dict[str, str]] = field(default_factory=dict)
    """Workspace name -> variable -> where its list names it (`/path/argus.yaml:3`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Each loop admits its own workspace from its own thread."""

    @classmethod
    def serving(cls, kept: Iterable[DesiredState], shared: Iterable[str] = ()) -> SecretLists:
        """The lists of the workspaces serve starts with; ArgusError if two of them overlap."""
        lists = cls(frozenset(_checked_shared(shared)))
        overlaps = []
        for desired in kept:
            overlaps += lists._overlaps(desired)
            lists._lists[desired.workspace.name] = _listed(desired)
        if overlaps:
            raise ArgusError("\n".join(overlaps))
        return lists

    def admit(self, desired: DesiredState) -> None:
        """A turn's freshly loaded workspace: its list is kept, or, if it names another served workspace's
        variable, the turn is refused (ArgusError) and the list it had stays."""
        with self._lock:
            overlaps = self._overlaps(desired)
            if overlaps:
                raise ArgusError("\n".join(overlaps) + f"\nNothing of workspace {desired.workspace.name} is "
                                 "planned or applied until then; the other workspace goes on.")
            self._lists[desired.workspace.name] = _listed(desired)

    def _overlaps(self, desired: DesiredState) -> list[str]:
        mine = _listed(desired)
        found = []
        for other, listed in sorted(self._lists.items()):
            if other == desired.workspace.name:
                continue
            for name in sorted(set(mine) & set(listed) - self.shared):
                found.append(_overlap(name, (desired.workspace.name, mine[name]), (other, listed[name])))
        return found


def _overlap(name: str, mine: tuple[str, str], other: tuple[str, str]) -> str:
    return (f"{mine[1]}: secrets: {name} is also listed by workspace {other[0]} ({other[1]}), served by this "
            f"same process: both workspaces' jobs would receive its one value, so one team could read the "
            f"other's. Give each team a variable of its own (like {mine[0].upper().replace('-', '_')}_{name}), "
            f"or, if the teams mean to share it, start argus serve with {SHARED_OPTION} {name}.")


def _listed(desired: DesiredState) -> dict[str, str]:
    """Each variable of the workspace's `secrets:`, with the line of argus.yaml that lists it."""
    source = desired.sources.get("workspace")
    path = Path(desired.root) / WORKSPACE_FILE
    return {name: f"{path}:{source.line_of(f'secrets.{index}') if source else 1}"
            for index, name in enumerate(desired.workspace.secrets)}


def _checked_shared(names: Iterable[str]) -> list[str]:
    checked = []
    for name in names:
        if not name.isidentifier() or not name.isascii():
            raise ArgusError(f"{SHARED_OPTION} {name!r}: give the name of an environment variable, like HF_TOKEN.")
        if held_variables.held(name):
            raise ArgusError(f"{SHARED_OPTION} {name}: {held_variables.refusal(name)}.")
        checked.append(name)
    return checked
