"""The registry of fabric kinds is the one description of each kind that the scenario model, the
runner, the Mininet shim and the controller's launcher read."""

from __future__ import annotations

import importlib.util
from typing import get_args

import pytest

from testbed.fabrics.all_kinds import CONTROLLER_APPS, EMULATED_FABRICS, KINDS, ROUTED_FABRICS, SECTIONS, FabricKind
from testbed.model.errors import InputError
from testbed.planning.scenario_file import make_fabric


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
    owners = [name for name, section in SECTIONS.items() if field in section.model_fields]
    with pytest.raises(InputError, match=f"field '{field}' applies only to kind {' or '.join(owners)}, not {kind}"):
        make_fabric(kind=kind, hosts=4, gpu_bandwidth_gbps=100, **{field: value})
