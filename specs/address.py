"""Addresses: how plans, targets, diagnostics and the audit log name what argus manages.

`job.NAME`, `code.NAME`, `dirs.CLUSTER`, `cluster.NAME`, `quotas.CLUSTER`, `dataset.NAME`, `model.NAME` and
`workspace`. An Address is a str, so it prints and serialises as itself; it is made and taken apart here and
nowhere else.
"""

from __future__ import annotations

import functools
import re

from specs.base import TextEnum


class Kind(TextEnum):
    JOB = "job"
    CODE = "code"
    """A CodeSnapshot."""
    DIRS = "dirs"
    """The directories of the NFS layout under one cluster's shared root."""
    CLUSTER = "cluster"
    QUOTAS = "quotas"
    """A cluster's quotas (specs.kinds.models.Quotas), named by the cluster."""
    WORKSPACE = "workspace"
    DATASET = "dataset"
    """A Dataset (specs.kinds.inputs), on one cluster's shared root."""
    MODEL = "model"
    """A Model (specs.kinds.inputs), on one cluster's shared root."""


SPEC_KINDS = {"Job": Kind.JOB, "CodeSnapshot": Kind.CODE, "Cluster": Kind.CLUSTER, "Workspace": Kind.WORKSPACE,
              "Quotas": Kind.QUOTAS, "Dataset": Kind.DATASET, "Model": Kind.MODEL}
"""The address kind of each resource kind a spec file can hold."""
_FORM = re.compile(r"(job|code|dirs|cluster|quotas|dataset|model)\.[a-z0-9][a-z0-9-]*|workspace")
"""Names as specs write them, without their length cap: a snapshot found on a shared root is
named by its directory, and argus still has to name it to report or prune it."""


class Address(str):
    """One address, checked when made: `Address("job.Foo")` raises ValueError."""

    __slots__ = ()

    def __new__(cls, text: str) -> Address:
        if not isinstance(text, str) or not _FORM.fullmatch(text):
            raise ValueError(f"{text!r} is not an address: job.NAME, code.NAME, dirs.CLUSTER, cluster.NAME, "
                             "quotas.CLUSTER or workspace")
        return super().__new__(cls, text)

    def __reduce__(self) -> tuple[object, tuple[str]]:
        """Pickled (argus's memo, state.memo, read only once its signature holds) as text already checked."""
        return _unchecked, (str(self),)

    @classmethod
    def parse(cls, text: object) -> Address | None:
        """The address, or None for anything else: targets in a saved plan are hostile input."""
        try:
            return cls(text)  # type: ignore[arg-type]
        except ValueError:
            return None

    @classmethod
    def of(cls, kind: Kind, name: str = "") -> Address:
        return _made(kind, name) if cls is Address else cls(_text(kind, name))

    @classmethod
    def of_spec(cls, spec_kind: str, name: str) -> Address:
        """The address of a resource of a spec file (`Job`, `CodeSnapshot`, `Cluster`, `Workspace`)."""
        return cls.of(SPEC_KINDS[spec_kind], name)

    @classmethod
    def job(cls, name: str) -> Address:
        return cls.of(Kind.JOB, name)

    @classmethod
    def code(cls, name: str) -> Address:
        return cls.of(Kind.CODE, name)

    @classmethod
    def dirs(cls, cluster: str) -> Address:
        return cls.of(Kind.DIRS, cluster)

    @classmethod
    def cluster(cls, name: str) -> Address:
        return cls.of(Kind.CLUSTER, name)

    @classmethod
    def quotas(cls, cluster: str) -> Address:
        return cls.of(Kind.QUOTAS, cluster)

    @property
    def kind(self) -> Kind:
        return Kind(self.partition(".")[0])

    @property
    def name(self) -> str:
        """The resource's name; empty for `workspace`."""
        return self.partition(".")[2]


def _unchecked(text: str) -> Address:
    return str.__new__(Address, text)


def _text(kind: Kind, name: str) -> str:
    return _PREFIX[kind] if kind is Kind.WORKSPACE else f"{_PREFIX[kind]}.{name}"


_PREFIX = {kind: kind.value for kind in Kind}
"""An enum's `.value` is a descriptor call: a plan makes tens of thousands of addresses."""


@functools.lru_cache(maxsize=1 << 16)
def _made(kind: Kind, name: str) -> Address:
    """A plan names each resource a dozen times (sources, diagnostics, changes): each address is checked once.
    Safe to share: an Address is an immutable str."""
    return Address(_text(kind, name))


WORKSPACE = Address.of(Kind.WORKSPACE)
