"""--target and --replace name Datasets and Models too (`argus apply --replace dataset.gsm8k` fetches it again)."""

from __future__ import annotations

import pytest

from reconcile.commands.common import check_addresses
from reconcile.model import PlanOptions
from specs.errors import ArgusError
from tests.support.input_planning import desired_with, url_dataset


def test_an_inputs_address_is_a_target_and_may_be_replaced():
    desired = desired_with(inputs=(url_dataset(),))
    check_addresses(desired, PlanOptions(targets=("dataset.gsm8k",), replace=("dataset.gsm8k",)))
    with pytest.raises(ArgusError, match="--target dataset.nope: no such address. Known: dataset.gsm8k"):
        check_addresses(desired, PlanOptions(targets=("dataset.nope",)))
