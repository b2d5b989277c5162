#!/usr/bin/env bash
# Cohort end to end on one machine: installs what is missing, builds the five binaries the demo
# needs, starts a coordinator and two agents on 127.0.0.1, submits examples/jobs/digits_ddp.yaml
# (a chief and two workers training the digits classifier data-parallel, gradients averaged by a
# Reduction Server of two reducers) and follows it live with `cohort watch` (elapsed time, replica
# states, events, and the chief's lines: loss and accuracy per epoch), then prints the final
# accuracy, checks that every training replica ended with the same model, says where the logs and
# the model are, and stops everything it started. The trainers pause after each epoch
# (DEMO_EPOCH_PAUSE_MS) so that the run lasts long enough to watch: about 40 s here. Where the
# coordinator has an HTTP endpoint (--http-endpoint), the demo prints the dashboard's address.
#
# Usage: scripts/demo.sh
# Environment (all optional):
#   BUILD_DIR     build folder (default: build)
#   DEMO_DIR      where the daemons keep state, logs and job output (default: a new /tmp dir)
#   DEMO_TIMEOUT  seconds the job may take before the demo cancels it (default 600)
#   DEMO_EPOCH_PAUSE_MS  the trainers' pause after each epoch (default 1000; 0: full speed, about
#                 1 s for the whole run). It does not change the model.
#   DEMO_SKIP_BUILD=1  use the binaries already in BUILD_DIR (no install, no build)
#   DEMO_JOB      the job file to run (default examples/jobs/digits_ddp.yaml); its
#                 `[digits-trainer]` commands are pointed at the freshly built binary
# Exit status: 0 when the job SUCCEEDED and every training replica ended with the same model,
# 1 otherwise (failed, cancelled, timed out, a daemon died, models differ).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
pause_ms="${DEMO_EPOCH_PAUSE_MS:-1000}"
[[ "$pause_ms" =~ ^[0-9]+$ ]] || { echo "demo: DEMO_EPOCH_PAUSE_MS must be a whole number of ms" >&2; exit 1; }
job_src="${DEMO_JOB:-examples/jobs/digits_ddp.yaml}"
[ -f "$job_src" ] || { echo "demo: no job file $job_src" >&2; exit 1; }

# shellcheck source=scripts/demo_lib.sh
. "$repo/scripts/demo_lib.sh"

demo_build cohort-coordinator cohort-agent cohort cohort-reducer digits-trainer

trainer_bin="$build/examples/digits-trainer"
for b in "$coordinator_bin" "$agent_bin" "$cli_bin" "$build/collective/cohort-reducer" \
         "$trainer_bin"; do
  [ -x "$b" ] || die "missing $b after the build"
done

demo_folder cohort-demo

# shellcheck disable=SC2119 # no extra flags
start_coordinator
start_agents 2 4 4096
wait_for_agents 2

# The job file with the trainer's absolute path and a fresh name (its output: $run/jobs/<job>).
base_name=$(sed -n 's/^name: *\([A-Za-z0-9_]*\).*/\1/p' "$job_src" | head -n 1)
job_name="${base_name:-demo}_$(date +%H%M%S)"
job_file="$run/$(basename "$job_src")"
# The digits trainers' args get --epoch-pause-ms (their only `args: [` lines: reducers are builtin).
pause_expr="s|^\( *args: \[\)|\1--epoch-pause-ms=$pause_ms, |"
grep -q '\[digits-trainer\]' "$job_src" || pause_expr=""
sed -e "s|\[digits-trainer\]|[$trainer_bin]|g" \
    -e "s|^name: .*|name: $job_name|" \
    ${pause_expr:+-e "$pause_expr"} \
    "$job_src" >"$job_file"

say "Submitting $job_file"
job=$(cohort submit "$job_file")
echo "job: $job"

follow_job "$job" "$timeout_s"
state=$(job_field "$job" state)

say "Job $job: $state"
cohort status "$job" || true
output_dir=$(job_field "$job" output_dir)
output_dir="${output_dir%/}"
cohort logs "$job" --replica chief-0 >"$run/chief-0.log" 2>/dev/null || true

if [ "$state" != SUCCEEDED ]; then
  echo "---- chief-0 log (tail)"
  tail -n 30 "$run/chief-0.log" || true
  echo "Replica logs: $run/agent-*/$job/<replica>/attempt-<n>.log (or: cohort logs $job --replica ROLE-INDEX)"
  exit 1
fi

accuracy=$(grep -o 'final test accuracy: [0-9.]*' "$run/chief-0.log" | tail -n 1 | awk '{print $4}')
if [ -z "$accuracy" ] && [ -f "$output_dir/model/metrics.json" ]; then
  accuracy=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["test_accuracy"])' \
             "$output_dir/model/metrics.json")
fi
# Data parallelism check: every training replica logs the CRC-32 of its final model.
models=""
crcs=()
training_replicas=$(cohort status "$job" --json | python3 -c '
import json, sys
print(" ".join(r["replica"] for r in json.load(sys.stdin)["replicas"] if r["role"] in ("chief", "worker")))')
for replica in $training_replicas; do
  crc=$(cohort logs "$job" --replica "$replica" 2>/dev/null | grep -o 'model crc32 [0-9a-f]*' |
        tail -n 1 | awk '{print $3}')
  models+="$replica=${crc:-?} "
  crcs+=("${crc:-?}")
done

echo
echo "Final test accuracy: ${accuracy:-unknown}"
echo "Final models:        $models"
echo "Model:               $output_dir/model/model.bin (metrics in $output_dir/model/metrics.json)"
echo "Checkpoints:         $output_dir/checkpoints/"
echo "Chief log:           $run/chief-0.log   (cohort logs $job --replica chief-0)"
echo "Replica logs:        $run/agent-*/$job/<replica>/attempt-<n>.log"
echo "Daemon logs:         $run/coordinator.log $run/agent-1.log $run/agent-2.log"
dashboard_line
if [ ${#crcs[@]} -eq 0 ] || [ "$(printf '%s\n' "${crcs[@]}" | sort -u | wc -l)" != 1 ] ||
   [ "${crcs[0]}" = "?" ]; then
  die "the training replicas did not end with one model: $models"
fi
echo "Every training replica ended with the same model (crc32 ${crcs[0]})."
