#!/usr/bin/env bash
# The Debian packages end to end on this machine: builds them (scripts/package.sh, in a build
# directory beside the test's own so that ccache serves the objects), installs them with dpkg -i,
# checks the installed layout (conffiles, the cohort user, key directories, man pages), verifies the
# installed units with systemd-analyze, starts the coordinator and an agent by hand exactly as the
# installed units would (their ExecStart lines and User=; no systemd in a container), runs a job with
# the installed CLI, checks that a reinstall keeps an edited conffile, then purges everything and
# checks that nothing is left: no file of any package, no /etc/cohort, no state directories, no
# cohort user.
#
# Needs root and dpkg (CI runs as root); skips (77) saying why otherwise, and refuses (skips) to
# touch a machine where a Cohort package, a `cohort` user or /etc/cohort already exists. Whatever
# happens, the daemons it started are stopped and the packages purged before it exits.
# Usage: deb_install_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src=$1 build=$2
packages=(cohort-coordinator cohort-agent cohort-client cohort-torch libcohort-collective-c0
          libcohort-collective-c-dev)

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }

[ "$(id -u)" -eq 0 ] || skip "needs root to dpkg -i (CI runs as root)"
command -v dpkg >/dev/null || skip "dpkg is not installed (not a Debian system)"
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$status" in
    *installed*|*config-files*|*unpacked*) skip "$p is already on this machine ($status): not touching a real installation" ;;
  esac
done
getent passwd cohort >/dev/null && skip "a 'cohort' user already exists: not touching it"
getent group cohort >/dev/null && skip "a 'cohort' group already exists: not touching it"
[ -e /etc/cohort ] && skip "/etc/cohort already exists: not touching it"
[ -e /var/lib/cohort ] && skip "/var/lib/cohort already exists: not touching it"
[ -e /var/lib/cohort-agent ] && skip "/var/lib/cohort-agent already exists: not touching it"

work=$(mktemp -d /tmp/cohort-deb-test.XXXXXX)
chmod 0755 "$work"
pids=()
installed=0
cleanup() {
  local rc=$?
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [ $installed -eq 1 ]; then
    echo "== cleanup: dpkg --purge"
    dpkg --purge "${packages[@]}" >/dev/null 2>&1 || dpkg --purge "${packages[@]}"
  fi
  if [ $rc -ne 0 ]; then
    for log in "$work"/*.log; do [ -f "$log" ] && { echo "--- $log"; tail -30 "$log"; }; done
  fi
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- build ---------------------------------------------------------------------------------------
step "build the packages"
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null)
pkg_build="${build%/}-deb"
BUILD_TYPE=${build_type:-RelWithDebInfo} "$src/scripts/package.sh" "$pkg_build" > "$work/package.log" 2>&1 ||
  fail "scripts/package.sh failed"
debs=("$pkg_build"/packages/*.deb)
[ -f "${debs[0]}" ] || fail "no .deb in $pkg_build/packages"
printf '  %s\n' "${debs[@]##*/}"
# Each package declares what it links: Depends from dpkg-shlibdeps.
for deb in "${debs[@]}"; do
  case "$deb" in *-dev_*) continue ;; esac
  dpkg-deb -f "$deb" Depends | grep -q "libc6" || fail "$(basename "$deb"): no shared-library Depends"
done
dpkg-deb -f "$pkg_build"/packages/cohort-coordinator_*.deb Depends | grep -q libzmq5 ||
  fail "cohort-coordinator does not depend on libzmq5"
for pair in cohort-coordinator:cohort-coordinator cohort-agent:cohort-agent cohort-agent:cohort-reducer \
            cohort-agent:cohort-ps cohort-client:cohort; do
  contents=$(dpkg-deb -c "$pkg_build"/packages/"${pair%%:*}"_*.deb)
  grep -q "/usr/share/man/man1/${pair#*:}.1.gz" <<<"$contents" ||
    fail "${pair%%:*} has no man page for ${pair#*:}"
done

# ---- install -------------------------------------------------------------------------------------
step "dpkg -i"
installed=1
dpkg -i "${debs[@]}" > "$work/dpkg-install.log" 2>&1 || fail "dpkg -i failed"

for f in /usr/bin/cohort-coordinator /usr/bin/cohort-agent /usr/bin/cohort-replica-init \
         /usr/bin/cohort-reducer /usr/bin/cohort-ps \
         /usr/bin/cohort /lib/systemd/system/cohort-coordinator.service \
         /lib/systemd/system/cohort-agent.service /etc/cohort/coordinator.conf /etc/cohort/agent.conf \
         /usr/lib/python3/dist-packages/cohort/__init__.py \
         /usr/lib/python3/dist-packages/cohort/wire/Envelope.py /usr/include/cohort/cohort_collective.h; do
  [ -e "$f" ] || fail "$f is not installed"
done
[ -n "$(ls /usr/lib/*/libcohort_collective_c.so.0 2>/dev/null)" ] || fail "libcohort_collective_c.so.0 is not installed"
soname=$(objdump -p /usr/lib/*/libcohort_collective_c.so.0 | awk '/SONAME/ {print $2}')
[ "$soname" = libcohort_collective_c.so.0 ] || fail "the C library's SONAME is '$soname'"
for b in cohort-coordinator cohort-agent cohort-reducer cohort-ps cohort; do
  file -L "/usr/bin/$b" | grep -q ", stripped" || fail "/usr/bin/$b is not stripped"
  # (A dpkg path-exclude for /usr/share/man, as in slim container images, drops man pages.)
  if ! grep -qs "path-exclude.*/usr/share/man" /etc/dpkg/dpkg.cfg.d/*; then
    man -w "$b" >/dev/null 2>&1 || fail "no man page for $b"
  fi
  # The package's version, and the commit it was built from (common/build_version.h).
  package_version=$(dpkg-query -W -f='${Version}' cohort-client | cut -d- -f1)
  printed=$("/usr/bin/$b" --version)
  [[ "$printed" =~ ^$b\ ${package_version//./\\.}(\+g[0-9a-f]{12}(\.dirty)?)?$ ]] ||
    fail "$b --version prints '$printed', not the package's version $package_version"
done
dpkg-query -W -f='${Conffiles}\n' cohort-coordinator | grep -q "/etc/cohort/coordinator.conf" ||
  fail "/etc/cohort/coordinator.conf is not a conffile"
dpkg-query -W -f='${Conffiles}\n' cohort-agent | grep -q "/etc/cohort/agent.conf" ||
  fail "/etc/cohort/agent.conf is not a conffile"
getent passwd cohort >/dev/null || fail "postinst made no cohort user"
for d in clients agents; do
  got=$(stat -c '%U:%G %a' /etc/cohort/keys/$d)
  [ "$got" = "root:cohort 750" ] || fail "/etc/cohort/keys/$d is $got, want root:cohort 750"
done
[ "$(stat -c '%U:%G %a' /var/lib/cohort)" = "cohort:cohort 750" ] || fail "/var/lib/cohort: $(stat -c '%U:%G %a' /var/lib/cohort)"
# The configs and the units agree on every path.
grep -q "^ExecStart=/usr/bin/cohort-coordinator --config /etc/cohort/coordinator.conf " \
  /lib/systemd/system/cohort-coordinator.service || fail "the coordinator unit's ExecStart"
grep -q "^LoadCredential=coordinator.key:/etc/cohort/keys/coordinator.key$" \
  /lib/systemd/system/cohort-coordinator.service || fail "the coordinator unit's key credential"
grep -q "^ExecStart=/usr/bin/cohort-agent --config /etc/cohort/agent.conf$" \
  /lib/systemd/system/cohort-agent.service || fail "the agent unit's ExecStart"
# Each replica is bounded in its own cgroup; systemd's default TasksMax would bound them together.
grep -q "^TasksMax=infinity$" /lib/systemd/system/cohort-agent.service || fail "the agent unit's TasksMax"
grep -q "^client-keys = /etc/cohort/keys/clients$" /etc/cohort/coordinator.conf || fail "coordinator.conf client-keys"
grep -q "^key-file = /etc/cohort/keys/agent.key$" /etc/cohort/agent.conf || fail "agent.conf key-file"
# (--help wraps its lines: compare with the whitespace squeezed.)
/usr/bin/cohort-agent --help | tr -s ' \n' '  ' | grep -q "default /etc/cohort/keys/agent.key" ||
  fail "the agent's default key path"
/usr/bin/cohort-coordinator --help | tr -s ' \n' '  ' | grep -q "=/etc/cohort/keys/coordinator.key" ||
  fail "the coordinator's default key path"

# ---- units ---------------------------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
  step "systemd-analyze verify"
  out=$(systemd-analyze verify /lib/systemd/system/cohort-coordinator.service \
        /lib/systemd/system/cohort-agent.service 2>&1) || { echo "$out"; fail "systemd-analyze verify"; }
  if echo "$out" | grep -E "cohort-(coordinator|agent)\.service"; then fail "systemd-analyze verify warned"; fi
else
  echo "systemd-analyze is not installed: the installed units are not verified (their paths are checked above)"
fi

# ---- keys and configs, as the README tells the admin ---------------------------------------------
step "keys and configs"
node=$(hostname)
cohort keygen --dir /etc/cohort/keys --name coordinator >/dev/null || fail "keygen coordinator"
cohort keygen --dir /etc/cohort/keys --name agent >/dev/null || fail "keygen agent"
cp /etc/cohort/keys/agent.pub "/etc/cohort/keys/agents/$node.pub"
mkdir -p "$work/user"
cohort keygen --dir "$work/user" --name client >/dev/null || fail "keygen client"
cp "$work/user/client.pub" /etc/cohort/keys/clients/test-user.pub
cp /etc/cohort/keys/coordinator.pub "$work/user/"
port=$((20000 + RANDOM % 20000))
client_port=$port agent_port=$((port + 1))
sed -i -e "s#^client-endpoint = .*#client-endpoint = tcp://127.0.0.1:$client_port#" \
       -e "s#^agent-endpoint = .*#agent-endpoint = tcp://127.0.0.1:$agent_port#" /etc/cohort/coordinator.conf
sed -i -e "s#^coordinator = .*#coordinator = tcp://127.0.0.1:$agent_port#" -e "s#^gpus = .*#gpus = 0#" \
       /etc/cohort/agent.conf
# The job below is test-user's (its client key's name); this host has no such account, so the
# agent runs its replicas as root, which must be allowed for that user.
printf 'users = test-user=root\nallow-root-users = test-user\n' >> /etc/cohort/agent.conf

# A reinstall keeps the edited conffiles.
dpkg -i "$pkg_build"/packages/cohort-coordinator_*.deb "$pkg_build"/packages/cohort-agent_*.deb \
  > "$work/dpkg-reinstall.log" 2>&1 </dev/null || fail "dpkg -i (reinstall) failed"
grep -q "^client-endpoint = tcp://127.0.0.1:$client_port$" /etc/cohort/coordinator.conf ||
  fail "reinstalling cohort-coordinator overwrote the edited /etc/cohort/coordinator.conf"
grep -q "^coordinator = tcp://127.0.0.1:$agent_port$" /etc/cohort/agent.conf ||
  fail "reinstalling cohort-agent overwrote the edited /etc/cohort/agent.conf"

# ---- daemons, started as their units would -------------------------------------------------------
# ExecStart= of an installed unit, with ${CREDENTIALS_DIRECTORY} pointing at a directory holding
# what its LoadCredential= lines name (owned by the unit's user, as systemd makes it).
unit_value() { sed -n "s/^$2=//p" "/lib/systemd/system/$1.service" | head -1; }
start_unit() {
  local unit=$1 user group exec creds cred
  user=$(unit_value "$unit" User) group=$(unit_value "$unit" Group)
  exec=$(unit_value "$unit" ExecStart)
  creds="$work/credentials/$unit"
  mkdir -p "$creds"
  while IFS= read -r cred; do
    [ -n "$cred" ] || continue
    cp "${cred#*:}" "$creds/${cred%%:*}" || fail "$unit: LoadCredential=$cred"
    chmod 0400 "$creds/${cred%%:*}"
  done < <(sed -n 's/^LoadCredential=//p' "/lib/systemd/system/$unit.service")
  [ -n "$user" ] && chown -R "$user:${group:-$user}" "$creds"
  chmod 0500 "$creds"
  exec=${exec//'${CREDENTIALS_DIRECTORY}'/$creds}
  echo "  $unit: ${user:+(as $user) }$exec"
  if [ -n "$user" ]; then
    # shellcheck disable=SC2086
    setpriv --reuid="$user" --regid="${group:-$user}" --init-groups -- $exec > "$work/$unit.log" 2>&1 &
  else
    # shellcheck disable=SC2086
    $exec > "$work/$unit.log" 2>&1 &
  fi
  pids+=($!)
}
step "start the daemons"
start_unit cohort-coordinator
coordinator_pid=${pids[-1]}
start_unit cohort-agent
[ "$(stat -c %U /proc/$coordinator_pid)" = cohort ] || fail "the coordinator does not run as cohort"

export COHORT_COORDINATOR=tcp://127.0.0.1:$client_port
cli=(cohort --key "$work/user/client.key" --server-key "$work/user/coordinator.pub")
for _ in $(seq 1 100); do
  "${cli[@]}" nodes 2>/dev/null | grep -q "$node" && break
  sleep 0.2
done
"${cli[@]}" nodes | grep -q "$node" || fail "the agent did not register (cohort nodes: $("${cli[@]}" nodes 2>&1))"
[ -f /var/lib/cohort/state.db ] || fail "the coordinator keeps no state in /var/lib/cohort"

# ---- a job with the installed CLI ----------------------------------------------------------------
step "run a job"
cat > "$work/job.yaml" <<'EOF'
name: deb_install_check
worker_pools:
  - role: chief
    replicas: 1
    resources: {gpus: 0, cpus: 1, memory_mb: 256}
    process:
      command: [/usr/bin/python3, -c]
      args: ["import cohort, cohort.collective; cohort.collective._library(); print('installed cohort from', cohort.__file__)"]
scheduling: {timeout: 2m, max_restarts: 0}
EOF
timeout 150 "${cli[@]}" --timeout 10s submit "$work/job.yaml" --wait > "$work/submit.log" 2>&1 ||
  fail "the job did not succeed: $(cat "$work/submit.log"); $("${cli[@]}" status deb_install_check 2>&1)"
"${cli[@]}" logs deb_install_check > "$work/job-logs.log" 2>&1
grep -q "installed cohort from /usr/lib/python3/dist-packages/cohort/__init__.py" "$work/job-logs.log" ||
  fail "the replica's output is not in cohort logs: $(cat "$work/job-logs.log")"

# ---- an upgrade under a running job --------------------------------------------------------------
# The package replaces /usr/bin/cohort-agent under the running agent; SIGUSR2 (what the postinst
# sends through `systemctl kill` on an upgrade where systemd runs the unit; there is no systemd
# here, so the signal is sent by hand) makes the agent execute the new file in place and take its
# replica over: the job runs on and ends, no restart spent.
step "upgrade the agent under a running job"
agent_pid=${pids[-1]}
cat > "$work/long.yaml" <<EOF
name: deb_upgrade_check
worker_pools:
  - role: chief
    replicas: 1
    resources: {gpus: 0, cpus: 1, memory_mb: 256}
    process:
      command: [/bin/sh, -c, "touch $work/long.up; while [ ! -e $work/long.go ]; do sleep 0.1; done; echo ran-to-its-end"]
scheduling: {timeout: 3m, max_restarts: 2}
EOF
"${cli[@]}" --timeout 10s submit "$work/long.yaml" > "$work/submit-long.log" 2>&1 ||
  fail "submit: $(cat "$work/submit-long.log")"
for _ in $(seq 1 150); do [ -e "$work/long.up" ] && break; sleep 0.2; done
[ -e "$work/long.up" ] || fail "the long job never started: $("${cli[@]}" status deb_upgrade_check 2>&1)"
children() { cat "/proc/$agent_pid/task/$agent_pid/children"; }
replica_before=$(children)
[ -n "$replica_before" ] || fail "the agent has no child replica"
dpkg -i "$pkg_build"/packages/cohort-agent_*.deb > "$work/dpkg-upgrade.log" 2>&1 </dev/null ||
  fail "dpkg -i (upgrade) failed"
case "$(readlink "/proc/$agent_pid/exe")" in
  *"(deleted)") ;;
  *) fail "dpkg -i did not replace the running agent's binary: $(readlink "/proc/$agent_pid/exe")" ;;
esac
kill -USR2 "$agent_pid"
took="live restart: took over 1 of 1 replica attempt"
for _ in $(seq 1 150); do grep -q "$took" "$work/cohort-agent.log" && break; sleep 0.2; done
grep -q "$took" "$work/cohort-agent.log" || fail "the agent did not take its replica over after SIGUSR2"
[ "$(readlink "/proc/$agent_pid/exe")" = /usr/bin/cohort-agent ] ||
  fail "the agent runs $(readlink "/proc/$agent_pid/exe"), not the upgraded /usr/bin/cohort-agent"
[ "$(children)" = "$replica_before" ] || fail "the replica is not the one before: $(children) vs $replica_before"
touch "$work/long.go"
for _ in $(seq 1 150); do
  "${cli[@]}" status deb_upgrade_check 2>/dev/null | grep -q SUCCEEDED && break
  sleep 0.2
done
"${cli[@]}" status deb_upgrade_check --json > "$work/long-status.json" 2>&1
/usr/bin/python3 -c '
import json, sys
job = json.load(open(sys.argv[1]))
assert job["state"] == "SUCCEEDED", job["state"]
assert job.get("restarts", 0) == 0, job.get("restarts")
' "$work/long-status.json" || fail "after the upgrade: $(cat "$work/long-status.json")"
"${cli[@]}" logs deb_upgrade_check | grep -q ran-to-its-end || fail "the replica's last line is not in its log"

# ---- purge ---------------------------------------------------------------------------------------
step "stop the daemons and purge"
for pid in "${pids[@]}"; do kill -TERM "$pid"; done
for pid in "${pids[@]}"; do wait "$pid" || fail "a daemon exited $? on SIGTERM"; done
pids=()
for deb in "${debs[@]}"; do dpkg-deb --fsys-tarfile "$deb" | tar -t; done | sed 's#^\./#/#' |
  grep -v '/$' | sort -u > "$work/package-files"
installed=0
dpkg --purge "${packages[@]}" > "$work/dpkg-purge.log" 2>&1 || fail "dpkg --purge failed"
left=()
while IFS= read -r f; do [ -e "$f" ] || [ -L "$f" ] && left+=("$f"); done < "$work/package-files"
for d in /etc/cohort /var/lib/cohort /var/lib/cohort-agent /usr/lib/python3/dist-packages/cohort \
         /usr/include/cohort; do
  [ -e "$d" ] && left+=("$d")
done
getent passwd cohort >/dev/null && left+=("user cohort")
getent group cohort >/dev/null && left+=("group cohort")
for p in "${packages[@]}"; do
  [ -n "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -v not-installed)" ] && left+=("package $p")
done
[ ${#left[@]} -eq 0 ] || fail "left after dpkg --purge: ${left[*]}"
echo "PASS: built, installed, verified, ran a job, purged; nothing left"
