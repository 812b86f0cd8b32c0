#!/usr/bin/env bash
# Set up this machine for the testbed (Debian 12 / Ubuntu 24.04, as root), then optionally act:
#   bash scripts/setup.sh run    set up, then run scenarios/quickstart.yaml end to end
#   bash scripts/setup.sh test   set up, then run the whole test suite (unit and root integration)
#   bash scripts/setup.sh        set up only (the Vagrant VM provisions with this)
#   bash scripts/setup.sh wheels DIR   fill DIR with every Python package the set-up installs (any user)
#   bash scripts/setup.sh vm [test]    the same set-up and quickstart (and tests) inside a local VM
#                                      with the kernel datapath and netem (scripts/vm.sh)
# With TESTBED_WHEELHOUSE=DIR the set-up installs Python packages from DIR only, never from an index
# (a machine without Internet access; its Debian packages must already be installed).
# Idempotent: packages, the venv and the calibration are only (re)made when missing or stale.
set -euo pipefail

action="${1:-none}"
case "$action" in run|test|none|wheels|vm) ;; *) echo "usage: bash scripts/setup.sh [run|test|wheels DIR|vm [test]]" >&2; exit 2 ;; esac
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "$action" in
  vm)  # everything else happens inside the guest
    exec bash "$root/scripts/vm.sh" "${2:-run}"
    ;;
esac
# Folders the caller names are relative to where they ran this from.
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
dir="${2:+$(absolute "$2")}"
wheelhouse="${TESTBED_WHEELHOUSE:+$(absolute "$TESTBED_WHEELHOUSE")}"
cd "$root"

# MLCommons' Chakra package, pinned in pyproject.toml's chakra-reference extra (installed without
# its dependencies: the parts the tests use need only protobuf).
chakra_reference_pin() {
  /usr/bin/python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["chakra-reference"][0])'
}

if [ "$action" = wheels ]; then
  if [ -z "$dir" ]; then
    echo "usage: bash scripts/setup.sh wheels DIR (the folder to fill with the testbed's Python packages)" >&2
    exit 2
  fi
  /usr/bin/python3 -m pip --version >/dev/null 2>&1 ||
    { echo "pip is missing for /usr/bin/python3: apt-get install python3-pip, then retry" >&2; exit 2; }
  mkdir -p "$dir"
  # The pinned dependencies with the extras the set-up installs, what builds the project, and pip.
  /usr/bin/python3 - > "$dir/requirements.txt" <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))
wanted = project["project"]["dependencies"] + [r for extra in ("test", "cluster")
                                              for r in project["project"]["optional-dependencies"][extra]]
print("\n".join(wanted + project["build-system"]["requires"] + ["pip"]))
PY
  /usr/bin/python3 -m pip download -q --only-binary=:all: -d "$dir" -r "$dir/requirements.txt"
  /usr/bin/python3 -m pip download -q --only-binary=:all: --no-deps -d "$dir" "$(chakra_reference_pin)"
  echo "== $(ls "$dir"/*.whl | wc -l) packages in $dir; on the machine without Internet access:"
  echo "   TESTBED_WHEELHOUSE=$dir bash scripts/setup.sh [run|test]"
  exit 0
fi
pip_from=()
if [ -n "$wheelhouse" ]; then
  if [ ! -f "$wheelhouse/requirements.txt" ]; then
    echo "TESTBED_WHEELHOUSE=$TESTBED_WHEELHOUSE holds no wheelhouse; fill one with: bash scripts/setup.sh wheels DIR" >&2
    exit 2
  fi
  pip_from=(--no-index --find-links "$wheelhouse")
fi

if [ "$(id -u)" != 0 ]; then
  echo "setup.sh must run as root (Mininet and Open vSwitch need it); try: sudo bash scripts/setup.sh $action" >&2
  exit 2
fi

source "$root/scripts/packages.sh"
install_missing "${testbed_packages[@]}"

# Open vSwitch's userspace datapath sends every port's packets through one packet socket and reads
# each port through a packet socket of its own; their buffers are the system defaults
# (net.core.wmem_default and rmem_default, about 208 KB here). Where queues build behind shaped
# switch ports (Elect-Cluster uplinks, fat-tree spines) the send buffer fills; where every host
# sends at once (an 8-GPU trace's all-to-all) a port's receive buffer fills before the switch
# thread reads it. Either way the switch drops packets its port counters never show: 39 TCP
# timeouts in one cluster BytePS run with a 208 KB send buffer, none with 4 MB; 58-1,153
# retransmitted segments and a timeout per 8-GPU Chakra trace run with 208 KB receive buffers,
# 0-1 with 4 MB. Raised (never lowered) before Open vSwitch starts; a running one is restarted to
# take them up (the receive buffers are taken as each run adds its ports).
socket_buffer=4194304
raised=
for default in net.core.wmem_default net.core.rmem_default; do
  if [ "$(sysctl -n $default)" -lt "$socket_buffer" ]; then
    if sysctl -q -w $default="$socket_buffer" 2>/dev/null; then
      raised=1
    else
      echo "note: could not raise $default to $socket_buffer; the userspace switch may drop packets" >&2
    fi
  fi
done
ovs_running=
ovs-vsctl --timeout=5 show >/dev/null 2>&1 && ovs_running=1
if [ -z "$ovs_running" ] || [ -n "$raised" ]; then
  if [ -n "$ovs_running" ]; then
    echo "== restarting Open vSwitch (its packet sockets take the larger buffers)"
  else
    echo "== starting Open vSwitch"
  fi
  if [ -d /run/systemd/system ]; then
    systemctl restart openvswitch-switch
  elif [ -n "$ovs_running" ]; then
    /usr/share/openvswitch/scripts/ovs-ctl restart >/dev/null
  else
    /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >/dev/null
  fi
  for _ in $(seq 1 50); do ovs-vsctl --timeout=2 show >/dev/null 2>&1 && break; sleep 0.2; done
  ovs-vsctl --timeout=5 show >/dev/null || { echo "Open vSwitch did not start" >&2; exit 1; }
fi

# The controllers of SiP-Ring and multi-shot SiP-OCS estimate each period's traffic from the
# switches' OpenFlow counters, which Open vSwitch refreshes only when its revalidators run: every
# max-idle milliseconds (default 10,000) or max-revalidator (default 500), the shorter. A 100 µs
# estimation period lasts 40-500 ms of wall time under dilation, so with the defaults the
# controller saw bytes in one period of three or four and re-planned a third as often as the
# oracle. 10 ms refreshes them within a quarter of the shortest period a run here uses; datapath
# flows idle that long are dropped and rebuilt on their next packet. Lowered, never raised.
max_idle=$(ovs-vsctl --timeout=5 --if-exists get Open_vSwitch . other_config:max-idle | tr -d '"')
if [ -z "$max_idle" ] || [ "$max_idle" -gt 10 ]; then
  ovs-vsctl --timeout=5 set Open_vSwitch . other_config:max-idle=10
fi

# Mininet's Python lives in the distribution's interpreter: build the venv from it, seeing system packages.
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "== building .venv and installing the testbed"
  [ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q "${pip_from[@]}" --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q "${pip_from[@]}" -e '.[test,cluster]'
  .venv/bin/python -m pip install -q "${pip_from[@]}" --no-deps "$(chakra_reference_pin)"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
.venv/bin/python -c "import mininet.net, os_ken, numpy, testbed, chakra.src.third_party.utils.protolib" || { echo "the venv is incomplete" >&2; exit 1; }
# The README's commands say `testbed ...` from any shell: link this checkout's command onto the PATH.
if [ "$(readlink /usr/local/bin/testbed 2>/dev/null)" != "$PWD/.venv/bin/testbed" ]; then
  ln -sfn "$PWD/.venv/bin/testbed" /usr/local/bin/testbed
  echo "== /usr/local/bin/testbed now runs this checkout's testbed"
fi

if ! .venv/bin/testbed doctor --json | .venv/bin/python -c "import json,sys; c = json.load(sys.stdin)['calibration']; sys.exit(0 if c['measured'] and c['ina_node_packets_per_s'] and c.get('agent_step_s') and c.get('memory_bytes') else 1)"; then
  echo "== calibrating this machine (once)"
  .venv/bin/testbed doctor --calibrate
fi

case "$action" in
  run)
    .venv/bin/testbed doctor
    .venv/bin/testbed run scenarios/quickstart.yaml
    ;;
  test)
    .venv/bin/python -m pytest -q --durations=20 tests
    ;;
esac
