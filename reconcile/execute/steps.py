"""The step table: for each member of `reconcile.model.Step`, the function that carries it out.

Plan and apply show a step by its own `describe()`; apply runs it through this table. A test holds
the table to the `Step` union, so no step type can be shown but not run, or run but not shown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, get_args

from reconcile.execute import admit, files, inputs, quotas, ray_steps
from reconcile.execute.world import Done, World
from reconcile.model import (
    DeleteInputStep,
    DeleteSnapshotStep,
    EnqueueStep,
    MkdirStep,
    QuotasStep,
    RootStep,
    SealInputStep,
    SnapshotStep,
    Step,
    StepModel,
    StopStep,
    SubmitStep,
)

Executor = Callable[[Any, World], Done]

EXECUTORS: Mapping[type[StepModel], Executor] = MappingProxyType({
    SubmitStep: ray_steps.submit,
    StopStep: ray_steps.stop,
    MkdirStep: files.make_dir,
    RootStep: files.lay_root,
    SnapshotStep: files.make_snapshot,
    DeleteSnapshotStep: files.delete_snapshot,
    EnqueueStep: admit.enqueue,
    QuotasStep: quotas.apply_quotas,
    SealInputStep: inputs.seal_input,
    DeleteInputStep: inputs.delete_input,
})


def execute(step: Step, world: World) -> Done:
    executor = EXECUTORS.get(type(step))
    if executor is None:  # a programming error, never a user's: steps come from the planner
        raise TypeError(f"no executor for step type {type(step).__name__}: add it to reconcile.execute.steps")
    return executor(step, world)


def step_types() -> tuple[type[StepModel], ...]:
    """Every member of the `Step` union."""
    union = get_args(Step)[0]
    return get_args(union)
