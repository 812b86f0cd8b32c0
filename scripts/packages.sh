# Debian packages the testbed needs, and installing the missing ones (sourced by setup.sh and vm.sh).
testbed_packages=(mininet openvswitch-switch iperf3 ethtool iproute2 nftables iptables tcpdump iputils-ping procps
                  python3 python3-venv python3-pip)

install_missing() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}
