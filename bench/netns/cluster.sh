#!/usr/bin/env bash
# cluster.sh: an emulated cluster of K hosts on one machine, for the all-reduce benchmarks.
#
#   cluster.sh check                       can this kernel do it? (netns, veth, bridge, tbf)
#   cluster.sh up [--hosts K] [--rate 1gbit] [--subnet 10.77.0] [--burst BYTES] [--latency 20ms]
#   cluster.sh down                        remove every namespace this script made
#   cluster.sh exec HOST CMD [ARGS...]     run CMD inside HOST (h3, cohort-h3 or 3)
#   cluster.sh addr HOST                   print HOST's address
#   cluster.sh status                      namespaces, addresses, qdiscs and their counters
#   cluster.sh counters                    per host, one "HOST KEY VALUE" line each: its TCP
#                                          counters of lost time (RetransSegs, TCPTimeouts: RTOs,
#                                          TCPLossProbes, TCPToZeroWindowAdv ...) and its links' tbf drops
#                                          (egress_drops, ingress_drops); cumulative since `up`
#
# Topology: one network namespace per host (cohort-h0 .. cohort-h{K-1}) and one for the switch
# (cohort-sw, holding the bridge "br0"); host i's eth0 is a veth whose peer p<i> is a bridge port.
# Nothing is created in the root namespace and no address outside the namespaces is used:
# host i has ${SUBNET}.(i+1)/24 on eth0 and its own loopback, and the namespaces have no route
# anywhere else.
#
# Shaping: every link is rate-limited in both directions with tbf (netem and ifb are not needed):
# the host side of the veth (eth0, the host's egress) and the switch side (p<i>, the egress
# toward the host, i.e. the host's ingress). A host therefore sends at most RATE and receives at
# most RATE, in full duplex, like a port of a non-blocking switch.
#
# Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN). Exits non-zero with a clear message when the kernel
# or the sandbox does not allow network namespaces or tbf.
set -euo pipefail

# COHORT_NETNS_PREFIX names another cluster's namespaces (a test's, beside a bench's cluster).
PREFIX=${COHORT_NETNS_PREFIX:-cohort}
SWITCH=${PREFIX}-sw
STATE_DIR=/run/${PREFIX}-netns
STATE_FILE=${STATE_DIR}/cluster.env

die() { echo "cluster.sh: $*" >&2; exit 1; }
. "$(dirname "$0")/../common/flags.sh"

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Converts a tc rate ("1gbit", "500mbit", "100kbit", "1000000bit") to bits per second.
rate_bps() {
  local r=${1,,}
  case "$r" in
    *gbit) echo $(( ${r%gbit} * 1000000000 )) ;;
    *mbit) echo $(( ${r%mbit} * 1000000 )) ;;
    *kbit) echo $(( ${r%kbit} * 1000 )) ;;
    *bit) echo "${r%bit}" ;;
    *) die "rate '$1' must end in gbit, mbit, kbit or bit (integers)" ;;
  esac
}

host_ns() {
  local h=$1
  case "$h" in
    ${PREFIX}-h*) echo "$h" ;;
    h[0-9]*) echo "${PREFIX}-$h" ;;
    [0-9]*) echo "${PREFIX}-h$h" ;;
    *) die "bad host '$h' (use h0, ${PREFIX}-h0 or 0)" ;;
  esac
}

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces and tc)"
  command -v ip >/dev/null || die "iproute2 'ip' not found (apt-get install iproute2)"
  command -v tc >/dev/null || die "iproute2 'tc' not found (apt-get install iproute2)"
}

# Probes the kernel with a throwaway namespace pair; prints what fails.
cmd_check() {
  need_root
  local a=${PREFIX}-probe-a b=${PREFIX}-probe-b ok=1
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  if ! ip netns add "$a" 2>/dev/null; then
    die "cannot create network namespaces here (ip netns add failed): the emulated cluster cannot run in this sandbox"
  fi
  ip netns add "$b"
  if ! ip link add v0 netns "$a" type veth peer name v1 netns "$b" 2>/dev/null; then
    echo "check: veth pairs: NOT supported" >&2; ok=0
  else
    echo "check: network namespaces, veth: ok"
    if ip -n "$a" link add br0 type bridge 2>/dev/null; then echo "check: bridge: ok"
    else echo "check: bridge: NOT supported" >&2; ok=0; fi
    if tc -n "$a" qdisc add dev v0 root tbf rate 1gbit burst 256kb latency 20ms 2>/dev/null; then
      echo "check: tc tbf: ok"
    else
      echo "check: tc tbf: NOT supported" >&2; ok=0
    fi
    if tc -n "$b" qdisc add dev v1 root netem delay 1ms 2>/dev/null; then
      echo "check: tc netem: ok (not needed)"
    else
      echo "check: tc netem: not available (not needed: tbf on both veth ends is used)"
    fi
  fi
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  [ "$ok" -eq 1 ] || die "this kernel lacks what the emulated cluster needs (see above)"
  echo "check: the emulated cluster can run here"
}

cmd_up() {
  local hosts=8 rate=1gbit subnet=10.77.0 burst="" latency=20ms
  while [ $# -gt 0 ]; do
    value_flag "hosts rate subnet burst latency" "$@" || die "up: unknown flag '$1'"
    shift 2
  done
  need_root
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 2 ] && [ "$hosts" -le 200 ] ||
    die "--hosts must be 2..200"
  [[ "$subnet" =~ ^10\.[0-9]+\.[0-9]+$ ]] || die "--subnet must look like 10.77.0 (a /24 inside the namespaces)"
  local bps
  bps=$(rate_bps "$rate")
  if [ -z "$burst" ]; then
    # Two milliseconds of traffic at the link rate, at least 128 KiB. The bucket must hold the
    # largest packet tbf is given, a GSO super-packet: up to 64 KiB of payload plus its headers,
    # so a bucket of exactly 64 KiB is too small for it and tbf splits such packets (at 250 Mbit,
    # where 2 ms is less than 64 KiB, the Reduction Server then ran at 45-50% of the link and the
    # ring at 80% of its bound, measured; 88% and 92% with 128 KiB).
    burst=$(( bps / 8 / 500 ))
    [ "$burst" -ge 131072 ] || burst=131072
  fi
  if ip netns list | grep -q "^${SWITCH}\b"; then
    die "a cluster is already up (run: $0 down)"
  fi
  if ! ip netns add "$SWITCH" 2>/dev/null; then
    die "cannot create network namespaces here (ip netns add failed): the emulated cluster cannot run in this sandbox"
  fi
  trap 'echo "cluster.sh: setup failed, removing what was made" >&2; cmd_down >/dev/null 2>&1 || true' ERR
  ip -n "$SWITCH" link set lo up
  ip -n "$SWITCH" link add br0 type bridge
  ip -n "$SWITCH" link set br0 up
  local i ns
  for ((i = 0; i < hosts; i++)); do
    ns=${PREFIX}-h$i
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # IPv4 only: no IPv6 neighbour discovery or multicast chatter on the shaped links.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$SWITCH"
    ip -n "$SWITCH" link set "p$i" master br0
    ip -n "$SWITCH" link set "p$i" up
    ip -n "$ns" addr add "${subnet}.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # Egress of the host, and egress of the switch port toward the host (the host's ingress).
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency "$latency"
    tc -n "$SWITCH" qdisc add dev "p$i" root tbf rate "$rate" burst "$burst" latency "$latency"
  done
  trap - ERR
  mkdir -p "$STATE_DIR"
  cat >"$STATE_FILE" <<EOF
COHORT_NETNS_HOSTS=$hosts
COHORT_NETNS_RATE=$rate
COHORT_NETNS_RATE_BPS=$bps
COHORT_NETNS_SUBNET=$subnet
COHORT_NETNS_BURST=$burst
EOF
  # The bridge runs without STP, so its ports forward at once: no settling wait is needed.
  echo "cluster up: $hosts hosts ${PREFIX}-h0..h$((hosts - 1)) at ${subnet}.1..${subnet}.${hosts}," \
       "switch ${SWITCH}, every link $rate each way (tbf burst $burst, latency $latency)"
}

cmd_down() {
  need_root
  local ns n=0 namespaces pids
  namespaces=$(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}-(h[0-9]+|sw)$" || true)
  # What still runs on a host goes with it: a process started by `exec` (a daemon, its children)
  # would otherwise outlive its namespace's name, unreachable and unstopped. TERM first, as a
  # host's shutdown, then KILL what is left a second later.
  pids_inside() { for ns in $namespaces; do ip netns pids "$ns"; done; }
  pids=$(pids_inside)
  if [ -n "$pids" ]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    sleep 1
    pids=$(pids_inside)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  for ns in $namespaces; do
    ip netns del "$ns" && n=$((n + 1))
  done
  rm -f "$STATE_FILE"
  echo "cluster down: removed $n namespaces"
}

cmd_exec() {
  [ $# -ge 2 ] || usage
  local ns
  ns=$(host_ns "$1")
  shift
  exec ip netns exec "$ns" "$@"
}

cmd_addr() {
  [ $# -eq 1 ] || usage
  [ -f "$STATE_FILE" ] || die "no cluster is up"
  # shellcheck disable=SC1090
  . "$STATE_FILE"
  local ns
  ns=$(host_ns "$1")
  echo "${COHORT_NETNS_SUBNET}.$(( ${ns#${PREFIX}-h} + 1 ))"
}

cmd_status() {
  [ -f "$STATE_FILE" ] || { echo "no cluster is up"; return 1; }
  cat "$STATE_FILE"
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}-h[0-9]+$" | sort -V); do
    echo "== $ns"
    ip -n "$ns" -br addr show dev eth0
    tc -n "$ns" -s qdisc show dev eth0 | sed 's/^/  egress  /'
    tc -n "$SWITCH" -s qdisc show dev "p${ns#${PREFIX}-h}" | sed 's/^/  ingress /'
  done
}

cmd_counters() {
  [ -f "$STATE_FILE" ] || die "no cluster is up"
  local ns h
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^${PREFIX}-h[0-9]+$" | sort -V); do
    h=${ns#"${PREFIX}"-}
    # /proc/net is the reading process's namespace: a header line of names, then one of values.
    ip netns exec "$ns" cat /proc/net/snmp /proc/net/netstat | awk -v h="$h" '
      $1 == "Tcp:" || $1 == "TcpExt:" {
        if (!($1 in names)) { names[$1] = $0; next }
        n = split(names[$1], k); split($0, v)
        for (i = 2; i <= n; i++)
          if (k[i] ~ /^(RetransSegs|TCPTimeouts|TCPLossProbes|TCPFastRetrans|TCPSynRetrans|TCPDSACKRecv|TCPToZeroWindowAdv|DelayedACKs|TCPAbortOnData)$/)
            print h, k[i], v[i]
      }'
    # The root qdisc's "(dropped N, ...)" of each direction of the host's link.
    local drops='/dropped/ && !done { gsub(",", "", $7); print $7; done = 1 }'
    echo "$h egress_drops $(tc -n "$ns" -s qdisc show dev eth0 | awk "$drops")"
    echo "$h ingress_drops $(tc -n "$SWITCH" -s qdisc show dev "p${h#h}" | awk "$drops")"
  done
}

[ $# -ge 1 ] || usage
verb=$1
shift
case "$verb" in
  check) cmd_check "$@" ;;
  up) cmd_up "$@" ;;
  down) cmd_down "$@" ;;
  exec) cmd_exec "$@" ;;
  addr) cmd_addr "$@" ;;
  status) cmd_status "$@" ;;
  counters) cmd_counters "$@" ;;
  -h|--help|help) usage ;;
  *) die "unknown verb '$verb'" ;;
esac
