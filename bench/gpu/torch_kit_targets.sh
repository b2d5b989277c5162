#!/usr/bin/env bash
# targets.sh (in a kit made by bench/gpu/torch_kit.sh): issue 13's figures on a machine with cores
# to spare: DDP throughput of the comm model at 1 Gbit/s (gloo, cohort, cohort + bf16 wire, and
# both cohort ones with whole calls, COHORT_TORCH_OVERLAP=0), and the all-reduce alone through the
# backend against cohort-bench's Reduction Server. Needs root (network namespaces) and iproute2's
# ip and tc on PATH (bench/netns/iproute_kit.sh carries them). One part a call, so that each fits
# a device call's time limit:
#
#   targets.sh OUT ddp|allreduce [run.sh flags...]     (later flags override the defaults below)
#
# Builds the extension against PYTHON's torch first (build_ext.sh; reused when OUT's work folder
# already has it), makes the build folder run.sh expects (python/ and a cohort-bench that runs the
# kit's binary with the kit's libraries), then runs bench/torch/run.sh. Writes OUT/summary.md,
# OUT/commands.txt, OUT/log.txt and the raw rows (run.sh's output contract) plus OUT/machine.txt.
# Environment: PYTHON (default python3), TORCHKIT_WORK (the build; default /tmp/cohort-targets).
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: targets.sh OUT ddp|allreduce [run.sh flags...]}
part=${2:?usage: targets.sh OUT ddp|allreduce [run.sh flags...]}
shift 2
case "$part" in
  ddp) defaults=(--what ddp --models comm --rate 1gbit --windows 3 --steps 3 --warmup 2
                 --configs gloo,cohort,cohort-serial,cohort-bf16,cohort-bf16-serial) ;;
  # 40 calls a size (8 s at most: run.sh's cap): at 1-4 MiB, where a call is 9-35 ms, fewer calls
  # let one stalled call decide the mean.
  allreduce) defaults=(--what allreduce --rate 1gbit --sizes 1M:64M --iters 40) ;;
  *) echo "targets.sh: the part is ddp or allreduce, not '$part'" >&2; exit 2 ;;
esac
py=$(command -v "${PYTHON:-python3}") || { echo "targets.sh: no ${PYTHON:-python3}" >&2; exit 2; }
for tool in ip tc; do
  command -v "$tool" >/dev/null || { echo "targets.sh: $tool is not on PATH (bench/netns/iproute_kit.sh)" >&2; exit 2; }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${TORCHKIT_WORK:-/tmp/cohort-targets}
mkdir -p "$work"
{
  echo "# targets.sh $part at $(date -u +%FT%TZ): $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
  cat "$kit/VERSION" 2>/dev/null
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' 2>&1
} >"$out/machine.txt"

if ! ls "$work"/python/cohort/torch/_C*.so >/dev/null 2>&1; then
  "$kit/build_ext.sh" "$py" "$work" >"$out/build.txt" 2>&1 || {
    echo "targets.sh: build_ext.sh failed (OUT/build.txt):" >&2
    tail -20 "$out/build.txt" >&2
    exit 1
  }
fi
fake=$work/fakebuild
mkdir -p "$fake/bench/cohort_bench"
ln -sfn "$work/python" "$fake/python"
printf '#!/usr/bin/env bash\nexec "%s/bin/run.sh" cohort-bench "$@"\n' "$kit" >"$fake/bench/cohort_bench/cohort-bench"
chmod +x "$fake/bench/cohort_bench/cohort-bench"

# The kit's UCX modules (cma) for the ranks; run.sh starts cohort-bench through the wrapper above.
export UCX_MODULE_DIR=$kit/lib/ucx
"$kit/bench/torch/run.sh" "${defaults[@]}" --python "$py" --build-dir "$fake" --out "$out" "$@"
