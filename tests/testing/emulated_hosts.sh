# emulated_hosts.sh: sourced by the tests that run processes on emulated hosts (network namespaces
# made by bench/netns/cluster.sh). `emulated_hosts SOURCE_DIR NAME` skips the test (exit 77,
# saying why) unless this is root and namespaces can be made here; names this test's namespaces
# apart from any other cluster's; makes the folder $run; and on exit stops the processes in $pids,
# takes the cluster down and removes $run. cluster() is cluster.sh, on HOST CMD... runs CMD on a
# host; skip and fail end the test.
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }
cluster() { bash "$emulated_hosts_script" "$@"; }
on() { local host=$1; shift; cluster exec "$host" "$@"; }

emulated_hosts() {
  emulated_hosts_script="$1/bench/netns/cluster.sh"
  [ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
  export COHORT_NETNS_PREFIX="cohort-$2$$"
  local why
  why=$(cluster check 2>&1) || skip "no emulated hosts here: $(tail -n 1 <<<"$why")"
  run=$(mktemp -d "/tmp/cohort-$2.XXXXXX")
  pids=()
  trap emulated_hosts_cleanup EXIT
}

emulated_hosts_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  cluster down >/dev/null 2>&1 || true
  rm -rf "$run"
}
