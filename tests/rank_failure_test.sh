#!/usr/bin/env bash
# One rank of a training job killed (SIGKILL) or stopped (SIGSTOP): every other rank must notice
# it by itself (the heartbeat watchdog, comm/watchdog.h), print one line naming the failed rank,
# and exit non-zero within train.dist.timeout — under mpirun, which ends the job itself, and under
# a launcher that leaves the survivors running (mpirun with orte_enable_recovery: a rank's death
# or stop changes nothing for the others, as under srun or ranks started one by one).
# Prints one line per case with the measured detection time (signal to the last survivor's exit).
# Usage: rank_failure_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC [CASE ...]
#   CASE = NP:SIGNAL:LAUNCHER[:timeout], SIGNAL KILL|STOP, LAUNCHER mpirun|keep; the failed rank is
#   random. With :timeout the watchdog is off (train.dist.heartbeat=false) and the collective
#   timeout must fire: one line per survivor, within 3 s of train.dist.timeout (not twice it).
#   Without cases: 4:KILL:mpirun 4:STOP:keep 8:KILL:keep 8:STOP:mpirun.
#   All eight, several times:  rank_failure_test.sh ... $(for i in 1 2 3; do echo {4,8}:{KILL,STOP}:{mpirun,keep}; done)
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
shift 3
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(4:KILL:mpirun 4:STOP:keep 8:KILL:keep 8:STOP:mpirun)
timeout_s=10
work=$(mktemp -d)
job=""
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  [ -n "$job" ] && kill -9 "$job" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1

for i in $(seq 1 100); do printf 'line %d of the small corpus, with some words.\n%%\n' "$i" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null || { echo "preprocess failed"; exit 1; }
# Under the keeping launcher each rank runs in this wrapper, which records its exit status (the
# launcher itself reports none).
cat > "$work/rank.sh" << 'EOF'
#!/usr/bin/env bash
"$@"
rc=$?
echo "$rc" > "$RANK_STATUS_DIR/rc.$OMPI_COMM_WORLD_RANK"
exit "$rc"
EOF

fail=0
n=0
for c in "${cases[@]}"; do
  IFS=: read -r np sig launcher mode <<< "$c"
  heartbeat=true
  [ "${mode:-}" = timeout ] && heartbeat=false
  n=$((n + 1))
  run="$work/run$n"
  mkdir -p "$run/status"
  victim=$((RANDOM % np))
  wrap=()
  extra=()
  if [ "$launcher" = keep ]; then
    extra=(--mca orte_enable_recovery 1)
    wrap=(env "RANK_STATUS_DIR=$run/status" bash "$work/rank.sh")
  fi
  "$mpiexec" --allow-run-as-root --oversubscribe "${extra[@]}" -np "$np" "${wrap[@]}" "$bin" train configs/gpt2/tiny.yaml \
    tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document" model.num_layers=1 \
    model.hidden_size=32 model.num_attention_heads=2 model.ffn_hidden_size=64 model.max_seq_length=32 \
    data.seq_length=32 train.train_iter=1000000 train.train_micro_batch_size=1 train.log_period=1 \
    train.evaluation.enabled=false train.checkpointer.period=0 "train.dist.timeout=$timeout_s" "train.dist.heartbeat=$heartbeat" \
    "train.output_dir=$run/out" > "$run/stdout" 2> "$run/stderr" &
  job=$!
  # Training under way (a few steps logged; up to 300 s: eight sanitizer-built ranks on two cores
  # start slowly), then each rank's meshflow process (its environment names its rank).
  for _ in $(seq 1 3000); do
    [ "$(cat "$run/out/metrics.jsonl" 2> /dev/null | wc -l)" -ge 3 ] && break
    kill -0 "$job" 2> /dev/null || break
    sleep 0.1
  done
  pids=()
  for pid in $(pgrep -f "train.output_dir=$run/out"); do
    [ "$(cat "/proc/$pid/comm" 2> /dev/null)" = meshflow ] || continue
    r=$(tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    [ -n "$r" ] && pids[$r]=$pid
  done
  if [ "${#pids[@]}" -ne "$np" ]; then
    echo "FAIL $c: training did not start, or not every rank found (${#pids[@]} of $np)"; cat "$run/stderr"
    fail=1; kill -9 "$job" 2> /dev/null; wait "$job" 2> /dev/null; job=""; continue
  fi
  start=$(date +%s.%N)
  kill "-$sig" "${pids[$victim]}"
  # Every survivor gone, or 60 s.
  while :; do
    alive=0
    for r in "${!pids[@]}"; do [ "$r" -ne "$victim" ] && kill -0 "${pids[$r]}" 2> /dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    [ "$(echo "$(date +%s.%N) - $start > 60" | bc)" -eq 1 ] && break
    sleep 0.05
  done
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  kill -9 "${pids[$victim]}" 2> /dev/null  # the stopped rank: the launcher may wait for it
  wait "$job"
  rc=$?
  job=""
  bad=0
  if [ "$alive" -ne 0 ]; then echo "FAIL $c: survivors still run 60 s after rank $victim got SIG$sig"; bad=1; fi
  limit=$timeout_s
  [ "$heartbeat" = false ] && limit=$((timeout_s + 3))
  [ "$(echo "$elapsed > $limit" | bc)" -eq 1 ] &&
    { echo "FAIL $c: the survivors took ${elapsed} s, over $limit s (train.dist.timeout=$timeout_s)"; bad=1; }
  for r in "${!pids[@]}"; do
    [ "$r" -eq "$victim" ] && continue
    lines=$(grep -c "^meshflow: error: \[rank $r/$np\]" "$run/stderr")
    [ "$lines" -eq 1 ] || { echo "FAIL $c: rank $r printed $lines error lines, not one"; bad=1; }
    if [ "$heartbeat" = true ]; then
      grep "^meshflow: error: \[rank $r/$np\]" "$run/stderr" | grep -q "rank $victim (pid" ||
        { echo "FAIL $c: rank $r does not name the failed rank $victim"; bad=1; }
    else
      grep "^meshflow: error: \[rank $r/$np\]" "$run/stderr" | grep -q "timed out after $timeout_s s" ||
        { echo "FAIL $c: rank $r's line is not the collective timeout's"; bad=1; }
    fi
    [ "$(grep -c "never completed" "$run/stderr")" -eq 0 ] || { echo "FAIL $c: a second message (never completed)"; bad=1; }
    if [ "$launcher" = keep ]; then
      st=$(cat "$run/status/rc.$r" 2> /dev/null || echo none)
      [ "$st" != none ] && [ "$st" -ne 0 ] || { echo "FAIL $c: rank $r exit status $st, not non-zero"; bad=1; }
    fi
  done
  [ "$launcher" = mpirun ] && [ "$rc" -eq 0 ] && { echo "FAIL $c: mpirun exited 0"; bad=1; }
  if [ "$bad" -ne 0 ]; then
    echo "--- stderr of $c:"; cat "$run/stderr"; fail=1
  else
    printf 'ok %s: rank %d got SIG%s; every survivor %s and exited non-zero %.1f s later\n' "$c" "$victim" \
      "$sig" "$([ "$heartbeat" = true ] && echo "named it" || echo "timed out")" "$elapsed"
    grep "^meshflow: error: \[rank" "$run/stderr" | head -1 | sed 's/^/   e.g. /'
  fi
  rm -rf "$run"
done
exit "$fail"
