"""The emulated network as typed data (topology.json's parts): switches, hosts with their
interfaces, links with their emulated rates, and each kind's own layout. Pure and frozen: a kind's
builder makes it, the Mininet shim builds it, the controller programs it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SwitchSpec(_Part):
    """One Open vSwitch bridge: its name, datapath id, port count and role in the kind's layout."""

    name: str
    dpid: int
    ports: int
    role: str


class InterfaceSpec(_Part):
    """One host interface: on a switch port, or cabled straight to a `peer` interface (INA)."""

    name: str
    mac: str
    switch: str | None = None
    port: int | None = None
    peer: str | None = None
    payload_rate_bps: float


class HostSpec(_Part):
    """One emulated machine: a GPU, a parameter server's CPU machine or an aggregation node."""

    name: str
    rank: int
    ip: str
    mac: str
    role: str
    interfaces: tuple[InterfaceSpec, ...]
    switch: str | None = None  # the first interface's switch and port, where it has one
    port: int | None = None


class LinkSpec(_Part):
    """One cable: host to switch, switch to switch, or host to host; shaped at `payload_rate_bps`."""

    host: str | None = None
    interface: str | None = None
    switch: str | None = None
    port: int | None = None
    peer_switch: str | None = None
    peer_port: int | None = None
    peer_host: str | None = None
    peer_interface: str | None = None
    payload_rate_bps: float
    line_rate_bps: float
    shaped_on: Literal["host", "switch", "both"]

    @property
    def joins_switches(self) -> bool:
        return self.peer_switch is not None

    def switch_ends(self) -> list[str]:
        """The root-namespace interface names Mininet gives the switch ends of this link."""
        ends = [f"{self.switch}-eth{self.port}"] if self.switch is not None else []
        return ends + ([f"{self.peer_switch}-eth{self.peer_port}"] if self.peer_switch is not None else [])


class ClusterLayout(_Part):
    gpus_per_server: int
    servers: int
    uplink_rate_bps: float


class FattreeLayout(_Part):
    leaf_hosts: int
    leaves: int
    spines: int
    oversubscription: float
    uplink_rate_bps: float


class RingLayout(_Part):
    wavelengths: int
    wavelength_rate_bps: float
    reach: int


class OcsLayout(_Part):
    switches: int
    circuit_rate_bps: float


class InaLayout(_Part):
    node: str
    node_rank: int


KindLayout = ClusterLayout | FattreeLayout | RingLayout | OcsLayout | InaLayout
