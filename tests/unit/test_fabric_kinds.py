"""The registry of fabric kinds is the one description of each kind that the scenario model, the
runner, the Mininet shim and the controller's launcher read."""

from __future__ import annotations

import importlib.util
from typing import get_args

import pytest

from testbed.model.fabric_kinds import CONTROLLER_APPS, EMULATED_FABRICS, KINDS, ROUTED_FABRICS, FabricKind
from testbed.model.scenario import Fabric


def test_every_kind_the_scenario_accepts_is_registered_once():
    assert set(get_args(FabricKind)) == set(KINDS)
    assert set(EMULATED_FABRICS) <= set(KINDS) and set(ROUTED_FABRICS) == {"sip-ocs", "sip-ring"}


def test_every_controller_app_named_exists():
    for module in set(CONTROLLER_APPS.values()):
        assert importlib.util.find_spec(module) is not None, module
    assert "ina" not in CONTROLLER_APPS  # no switch, so no controller


@pytest.mark.parametrize("kind,field,value", [("elect-flat", "wavelengths", 4), ("sip-ring", "cpu_servers", 2),
                                              ("elect-cluster", "estimate_period_us", 100.0)])
def test_a_field_of_another_kind_is_refused_with_its_owners(kind, field, value):
    owners = [spec.name for spec in KINDS.values() if field in spec.fields]
    with pytest.raises(ValueError, match=f"field '{field}' applies only to kind {' or '.join(owners)}, not {kind}"):
        Fabric(kind=kind, hosts=4, gpu_bandwidth_gbps=100, **{field: value})
