"""In one `argus serve A B`, a workspace's jobs read only that workspace's own variables.

A job's `${env:NAME}` is read from the serve process's environment, and one process serving several
workspaces holds every team's variables side by side. Each workspace lists what its jobs may read in its
own `secrets:` (specs.load.job_secrets), but that list is the team's own file: team A could list B's variable
and its jobs would receive B's value. So in a shared serve the lists must not overlap:

- at start, a variable in two served workspaces' lists is refused (exit 1, naming both lines), unless the
  operator, who exports the values, declares it shared with `--shared-secret NAME`: the teams then
  receive one value of it knowingly (a team-wide HF_TOKEN);
- while serving (a merge changes a list), a workspace whose list newly names a variable another served
  workspace lists is refused for the turn (nothing of it is planned or applied) and the one that listed
  it first keeps it: a merge in A's repository can never take B's variable, nor stop B's loop.

The operator's flag is the only authority, as the operator alone holds the values: neither team's git can
say a variable is shared. (Variables argus holds for itself are refused in every list anyway:
specs.kinds.held_variables.)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from specs.desired import DesiredState
from specs.errors import ArgusError
from specs.kinds import held_variables
from specs.kinds.notifications import URL_REFERENCE
from specs.parse.reading import WORKSPACE_FILE

SHARED_OPTION = "--shared-secret"


@dataclass
class SecretLists:
    """Each served workspace's accepted `secrets:` list; disjoint but for the operator's shared names."""

    shared: frozenset[str] = frozenset()
    _lists: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    """Workspace name -> variable -> where argus.yaml names it (`/path/argus.yaml:3`) and in what (`secrets`,
    `notifications`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    """Each loop admits its own workspace from its own thread."""

    @classmethod
    def serving(cls, kept: Iterable[DesiredState], shared: Iterable[str] = ()) -> SecretLists:
        """The lists of the workspaces serve starts with; ArgusError if two of them overlap."""
        lists, refused = cls.serving_apart(kept, shared)
        if refused:
            raise ArgusError("\n".join(dict.fromkeys(refused.values())))
        return lists

    @classmethod
    def serving_apart(cls, kept: Iterable[DesiredState], shared: Iterable[str] = ()) -> tuple[SecretLists,
                                                                                               dict[str, str]]:
        """The lists of the workspaces serve starts with, and the workspaces refused, with why: both of any two
        that name one variable (neither may have it: nobody can tell at start whose it is); the others run."""
        lists = cls(frozenset(_checked_shared(shared)))
        wanted = list(kept)
        refused: dict[str, str] = {}
        for desired in wanted:
            for other in wanted:
                if other.workspace.name < desired.workspace.name:
                    for said in lists._against(desired, other.workspace.name, _listed(other)):
                        refused[desired.workspace.name] = refused[other.workspace.name] = said
        for desired in wanted:
            if desired.workspace.name not in refused:
                lists._lists[desired.workspace.name] = _listed(desired)
        return lists, refused

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
        found = []
        for other, listed in sorted(self._lists.items()):
            if other != desired.workspace.name:
                found += self._against(desired, other, listed)
        return found

    def _against(self, desired: DesiredState, other: str, listed: dict[str, tuple[str, str]]) -> list[str]:
        mine = _listed(desired)
        return [_overlap(name, (desired.workspace.name, mine[name]), (other, listed[name]))
                for name in sorted(set(mine) & set(listed) - self.shared)]


def _overlap(name: str, mine: tuple[str, tuple[str, str]], other: tuple[str, tuple[str, str]]) -> str:
    (where, what), (theirs, _) = mine[1], other[1]
    return (f"{where}: {what}: {name} is also listed by workspace {other[0]} ({theirs}), served by this "
            f"same process: both workspaces' jobs would receive its one value, or both workspaces' routes would "
            f"send to what it holds, so one team could read the other's secret or speak in its channel. Give each "
            f"team a variable of its own (like {mine[0].upper().replace('-', '_')}_{name}), "
            f"or, if the teams mean to share it, start argus serve with {SHARED_OPTION} {name}.")


def _listed(desired: DesiredState) -> dict[str, tuple[str, str]]:
    """Each variable of the workspace's `secrets:` and of its notification routes' `to`, with the line of
    argus.yaml that names it and in what."""
    source = desired.sources.get("workspace")
    path = Path(desired.root) / WORKSPACE_FILE

    def at(field: str) -> str:
        return f"{path}:{source.line_of(field) if source else 1}"

    found = {}
    for number, route in enumerate(desired.workspace.notifications.routes):
        for index, reference in enumerate(route.to):
            match = URL_REFERENCE.match(reference)
            if match is not None:
                found[match.group(1)] = (at(f"notifications.routes.{number}.to.{index}"), "notifications")
    found.update({name: (at(f"secrets.{index}"), "secrets") for index, name in enumerate(desired.workspace.secrets)})
    return found


def _checked_shared(names: Iterable[str]) -> list[str]:
    checked = []
    for name in names:
        if not name.isidentifier() or not name.isascii():
            raise ArgusError(f"{SHARED_OPTION} {name!r}: give the name of an environment variable, like HF_TOKEN.")
        if held_variables.held(name):
            raise ArgusError(f"{SHARED_OPTION} {name}: {held_variables.refusal(name)}.")
        checked.append(name)
    return checked
