#!/usr/bin/env bash
# session.sh (in a kit made by bench/gpu/torch_kit.sh): issue 13's device figures in one device
# call that fits a deadline: the DDP comparison twice, in turns (gloo, cohort, cohort + bf16 wire;
# run-to-run spread on the lent machine is a few percent, as large as the margins to the targets)
# with the ACK flusher's A/B between them (bench/netns/delayed_ack_ab.sh), then the all-reduce
# alone through the backend against cohort-bench, then the compute-bound model's DDP comparison,
# each part only where the time left allows it. Each part's summary goes to standard output (the
# device call's output tail) and everything (summaries, raw rows, logs, commands) into one
# archive, OUT/res.tgz, since a device call brings back at most 8 files.
#
#   session.sh SECONDS [OUT]      (OUT defaults to $OUT, the device call's folder)
#
# Measured on the lent 16-core machine (2026-11-28): the build about 25 s, a DDP pass about 2 min,
# the all-reduce part about 1.5 min at 20 calls a size (targets.sh now asks for 40: about 2 min);
# SECONDS 560 leaves room for the DDP passes, the A/B (about 1 min) and the all-reduce; the
# compute model runs in what is left.
# Environment: as targets.sh (PYTHON, default /opt/torch/.venv/bin/python3 here: the lent image's
# interpreter with torch); iproute2 from the kit's neighbour .iproute (bench/netns/iproute_kit.sh).
set -u
kit=$(cd "$(dirname "$0")" && pwd)
budget=${1:?usage: session.sh SECONDS [OUT]}
dest=${2:-${OUT:?usage: session.sh SECONDS [OUT] (or set OUT)}}
[ -d "$kit/../.iproute/bin" ] && export PATH=$kit/../.iproute/bin:$PATH
export PYTHON=${PYTHON:-/opt/torch/.venv/bin/python3} PYTHONUNBUFFERED=1
res=$(mktemp -d /tmp/cohort-session.XXXXXX)/res
mkdir -p "$res" "$dest"
end=$((SECONDS + budget))
left() { echo $((end - SECONDS - 15)); }  # 15 s for the archive
trap 'tar czf "$dest/res.tgz" -C "$(dirname "$res")" res' EXIT
# The congestion control too: delayed ACKs stalled the Reduction Server under BBR, not cubic
# (bench/RESULTS.md, "Delayed ACKs").
{ nproc; nvidia-smi -L 2>/dev/null; uptime; uname -r; sysctl net.ipv4.tcp_congestion_control; } 2>&1 |
  tee "$res/host.txt"

# part NAME MIN_SECONDS MAX_SECONDS targets.sh-arguments...: runs when MIN_SECONDS are left.
part() {
  local name=$1 min=$2 max=$3 t
  shift 3
  t=$(left)
  if [ "$t" -lt "$min" ]; then
    echo "$name: skipped, $t s left (needs $min)"
    return
  fi
  timeout $((t < max ? t : max)) "$kit/targets.sh" "$res/$name" "$@" >"$res/$name.log" 2>&1
  echo "$name: rc $? at $SECONDS s"
  cat "$res/$name/summary.md" 2>/dev/null || tail -30 "$res/$name.log"
}
part ddp1 150 330 ddp --configs gloo,cohort,cohort-bf16
# The ACK flusher on and off with idle gaps between calls (bench/netns/delayed_ack_ab.sh, about
# 30 s a pair): whether this machine's kernel stalls the Reduction Server on delayed ACKs.
t=$(left)
if [ "$t" -ge 60 ]; then
  wrapper=$(dirname "$res")/cohort-bench
  printf '#!/usr/bin/env bash\nexec "%s/bin/run.sh" cohort-bench "$@"\n' "$kit" >"$wrapper"
  chmod +x "$wrapper"
  timeout $((t < 90 ? t : 90)) "$kit/bench/netns/delayed_ack_ab.sh" --bench "$wrapper" --pairs 2 \
    >"$res/delack.log" 2>&1
  echo "delack: rc $? at $SECONDS s"
  cat "$res/delack.log"
else
  echo "delack: skipped, $t s left (needs 60)"
fi
part ddp2 150 250 ddp --configs gloo,cohort,cohort-bf16
part allreduce 100 200 allreduce
# Last, where time is left: the compute-bound model, which the issue also asks figures for. Its
# step is about 0.2 s, so its windows take 20 steps: at the comm model's 3, one 180 ms all-reduce
# decided a window (2026-12-04).
part ddp-compute 60 150 ddp --models compute --configs gloo,cohort,cohort-bf16 --windows 5 \
  --steps 20 --warmup 5
