#!/usr/bin/env bash
# On the offline H200 or H100 host, after the staged vLLM is installed (../shared/gpu/README.md):
# set the environment, run `make reproduce` for each part with a shared time budget, and pack
# what came out into $OUT (at most 8 files come back: one archive of the raw runs, the autotune
# cache, the logs).
#
#   bash gpu/h200-run.sh "3 1" 8      # parts 3 then 1 on rig h200, stop starting new points after ~8 minutes
#   bash gpu/h200-run.sh "3:h200-a10g-kv:mns-256 1:h200-a10g-kv" 8   # PART[:RIG[:POINT,POINT...]] items
#   RIG=h100 bash gpu/h200-run.sh "0 3" 8   # the default rig of items that name none (the rig's profile refuses another GPU)
set -uo pipefail
PARTS=${1:?parts, e.g. "3 1" or "3:h200:mns-064,mns-512"}
BUDGET_MIN=${2:?budget in minutes}
# minutes may carry a fraction (9.4): bash arithmetic takes integers only, so the seconds come from awk (session 11's
# "9.4" stopped a call with a syntax error before it started)
BUDGET_S=$(awk -v m="$BUDGET_MIN" 'BEGIN { if (m !~ /^[0-9]+(\.[0-9]+)?$/) exit 1; printf "%d", m * 60 }') \
  || { echo "h200-run: budget '$BUDGET_MIN' is not a number of minutes"; exit 2; }
EXTRA=${3:-}  # more reproduce options for every item
GRACE_S=${GRACE_S:-40}  # past the budget, the seconds a part may still take (its page's render) before it is cut
# an item starts only with this many seconds left: one start and one point (the sweep itself refuses a budget under
# the rig's slowest recorded start and a point; a rig whose starts are known to be short may lower it)
MIN_LEFT_S=${MIN_LEFT_S:-360}
OUT=${OUT:-/tmp/h200-out}
mkdir -p "$OUT"
ls /opt/wallsite/.installed-* >/dev/null 2>&1 || { echo "COLD: the staged vLLM is not installed on this host"; exit 3; }
end=$(( $(date +%s) + BUDGET_S ))

# Tuning results of the Gated DeltaNet prefill kernels persist across server starts (and, carried in
# gpu/cache/autotune.tar, across hosts): see gpu/NOTES-autotune.md. Kernels and configs are unchanged.
W=/opt/wallcache
mkdir -p "$W/autotune"
export PYTHONPATH=$PWD/gpu/triton_autotune_cache:/opt/wallsite
export WALL_AUTOTUNE_DIR=$W/autotune WALL_AUTOTUNE_LOG=$W/autotune.log
export TRITON_CACHE_DIR=$W/triton VLLM_CACHE_ROOT=$W/vllm
# Each GPU keeps its own tuning: the H100 and the H200 are both sm_90, so Triton would reuse the other's choices.
# gpu/cache/autotune.tar is the h200's; another rig's is gpu/cache/autotune-<rig>.tar (none before its first call).
RIG=${RIG:-h200}
TUNED=gpu/cache/autotune.tar; [ "$RIG" = h200 ] || TUNED=gpu/cache/autotune-$RIG.tar
[ -f "$TUNED" ] && tar -C "$W/autotune" -xf "$TUNED"

# GPU clocks, power and temperature once a second for the whole call, a row per GPU with its index (gpu-samples.csv comes back with the
# runs): whether a slow session ran at lower clocks is then in the record, not a guess.
smi=gpu-samples.csv
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used,clocks_event_reasons.active \
  --format=csv -lms 1000 > "$OUT/$smi" 2>&1 & smi_pid=$!
sleep 1
kill -0 "$smi_pid" 2>/dev/null || { nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used \
  --format=csv -lms 1000 > "$OUT/$smi" 2>&1 & smi_pid=$!; }

stamp=$(mktemp); status=0
for item in $PARTS; do
  IFS=: read -r part rig points <<< "$item"
  rig=${rig:-$RIG}
  # the minutes left to a tenth (--budget-min takes a fraction): rounding down to whole minutes cost every call
  # of session 6 up to a minute of the sweep's budget
  left_s=$(( end - $(date +%s) ))
  [ "$left_s" -ge "$MIN_LEFT_S" ] || { echo "h200-run: under $MIN_LEFT_S s left (the sweep needs one start and one point): part $part on $rig not started"; break; }
  left=$(awk -v s="$left_s" 'BEGIN { printf "%.1f", int(s / 6) / 10 }')
  echo "h200-run: part $part, rig $rig, budget $left min${points:+, points $points}"
  # cut at the budget plus a margin (SIGTERM: the run stops its servers and records the point in flight as
  # interrupted), so that the packing below always runs inside the command's own time limit: a call killed from
  # outside packs nothing, and the notebook that make reproduce renders after its sweep is not in the sweep's budget
  # (--no-evidence: the evidence page is rendered here by make book, not on the device's counted time)
  timeout -k 20 $(( end + GRACE_S - $(date +%s) )) make reproduce PART="$part" RIG="$rig" PYTHON=python3 \
    ARGS="--budget-min $left --no-evidence $EXTRA${points:+ --points ${points//,/ }}" 2>&1 | tee -a "$OUT/reproduce.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
kill "$smi_pid" 2>/dev/null
tar -C "$W/autotune" -cf "$OUT/autotune.tar" .
cp "$W/autotune.log" "$OUT/" 2>/dev/null
# only the points this call wrote (a file comes back only under 16 MiB; packing every committed point
# as well once made the archive too large and lost a whole call's points)
find data/runs/*/* -name manifest.json -newer "$stamp" -printf '%h\n' 2>/dev/null | sort > "$OUT/points.txt"
tar -czf "$OUT/runs.tgz" -T "$OUT/points.txt"
ls -l "$OUT/runs.tgz"; [ "$(stat -c %s "$OUT/runs.tgz")" -lt 16000000 ] || echo "h200-run: WARNING runs.tgz is over 16 MB and will not come back"
du -sh "$W"/* 2>/dev/null
exit $status
