#!/usr/bin/env bash
# `meshflow launch` restarting a job whose rank was killed (SIGKILL) mid-run:
#  a. a reference: an uninterrupted 4-rank run of 32 steps (dropout on, checkpoints every 8 steps);
#  b. `launch --nproc 4`: rank 1 killed once step 10 is logged; the job restarts on 4 ranks from the
#     checkpoint of step 8 and finishes; every step's loss in metrics.jsonl (steps 9.. re-run after
#     the restart: the steps the first attempt logged past the checkpoint are run twice) equals the
#     reference's to 1e-5, and so do the first attempt's; launch.jsonl holds the two attempts, the
#     first with its cause (rank 1, signal 9);
#  c. `launch --nproc 4 --min-nproc 2`: the same kill, the job restarts on 2 ranks (data-parallel
#     size 2, accumulation 2: the same global batch) and logs the reference's losses to 1e-5;
#  d. a stop signal on 2 ranks (SIGUSR1 to mpirun, SIGTERM to `meshflow launch`): every rank stops
#     after the same step with its checkpoint, one line, exit 0; the resume logs the losses of an
#     uninterrupted run exactly.
# Prints the largest loss difference after each restart and the wall time.
# Usage: launch_restart_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
cleanup() { [ -n "${job:-}" ] && kill -9 "$job" 2> /dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1
t0=$(date +%s)

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 200
steps=32
args=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=2 model.hidden_size=32 model.num_attention_heads=2 model.ffn_hidden_size=64
      model.max_seq_length=32 data.seq_length=32 train.train_iter=$steps train.train_micro_batch_size=2
      train.log_period=1 train.evaluation.enabled=false train.checkpointer.period=8 train.checkpointer.max_to_keep=10
      train.dist.grad_bucket_mb=0.01)
launcher="$mpiexec --allow-run-as-root --oversubscribe"
mkfifo "$work/never"
exec {never}<> "$work/never"
fail=0

# a. The reference.
if ! $launcher -np 4 "$bin" train "${args[@]}" "train.output_dir=$work/ref" > "$work/ref.log" 2>&1; then
  echo "FAIL: the reference run exited non-zero"; tail -20 "$work/ref.log"; exit 1
fi

losses() {  # metrics file: "step loss" lines
  grep -o '"step":[0-9]*\|"loss":[^,}]*' "$1" | cut -d: -f2 | paste - -
}

# Largest |loss - reference| over the steps of $1 (each step once, all of 1..steps unless $2 = some).
compare() {
  local file=$1 want=${2:-all}
  awk -v want="$want" -v steps=$steps 'NR == FNR { ref[$1] = $2; next }
       { if ($1 in seen) { printf "FAIL: step %d twice in %s\n", $1, FILENAME; bad = 1 } seen[$1] = 1
         d = $2 - ref[$1]; if (d < 0) d = -d; if (d > max) max = d
         if (!($1 in ref)) { printf "FAIL: step %d not in the reference\n", $1; bad = 1 } n++ }
       END { if (want == "all" && n != steps) { printf "FAIL: %d steps in %s, want %d\n", n, FILENAME, steps; bad = 1 }
             if (max > 1e-5) { printf "FAIL: loss differs from the uninterrupted run by %.3g > 1e-5\n", max; bad = 1 }
             printf "%.3g\n", max; exit bad }' <(losses "$work/ref/metrics.jsonl") <(losses "$file")
}

# Runs `meshflow launch` on 4 ranks into $work/$1 with extra launch flags, kills rank 1 once step
# 10 is logged, waits for the launch to end; leaves the first attempt's metrics in $work/$1.before.
launch_and_kill() {
  local name=$1 out=$work/$1
  shift
  "$bin" launch --nproc 4 "$@" --max-restarts 2 --launcher "$launcher" "${args[@]}" "train.output_dir=$out" \
    > "$work/$name.out" 2> "$work/$name.err" &
  job=$!
  # Rank 1 of the first attempt (its environment says so), found while the job starts.
  local victim="" i pid lines=()
  for i in $(seq 1 1800); do
    for pid in $(pgrep -f "train.output_dir=$out"); do
      [ "$pid" = "$job" ] && continue
      tr '\0' '\n' < "/proc/$pid/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$pid
    done
    [ -n "$victim" ] && break
    kill -0 "$job" 2> /dev/null || break
    sleep 0.1
  done
  # Then step 10, watched without forking (a step takes a few tens of ms; the next checkpoint is
  # step 16): mapfile counts the lines, a read timing out on an empty fifo sleeps.
  for i in $(seq 1 30000); do
    [ -n "$victim" ] || break
    lines=()
    [ -f "$out/metrics.jsonl" ] && mapfile -t lines < "$out/metrics.jsonl"
    [ "${#lines[@]}" -ge 10 ] && break
    read -r -t 0.01 -u "$never"
  done
  if [ -z "$victim" ] || ! kill -9 "$victim" 2> /dev/null; then
    echo "FAIL ($name): rank 1 not found or gone before step 10 ($(wc -l < "$out/metrics.jsonl" 2> /dev/null) steps logged)"
    cat "$work/$name.err"; return 1
  fi
  cp "$out/metrics.jsonl" "$out.before"
  local start
  start=$(date +%s)
  while kill -0 "$job" 2> /dev/null && [ $(($(date +%s) - start)) -lt 300 ]; do sleep 0.2; done
  if kill -0 "$job" 2> /dev/null; then echo "FAIL ($name): the launch still runs 300 s after the kill"; return 1; fi
  wait "$job"
  local rc=$?
  job=""
  if [ "$rc" -ne 0 ]; then echo "FAIL ($name): meshflow launch exited $rc"; tail -30 "$work/$name.err"; return 1; fi
  return 0
}

# Checks launch.jsonl of run $1: two attempts, the first failed with rank 1 lost and restarted on
# $2 processes, the second resumed from a checkpoint and finished on $2 processes with
# accumulation $3.
check_log() {
  local name=$1 np=$2 accum=$3 log=$work/$1/launch.jsonl
  python3 - "$log" "$np" "$accum" << 'EOF' || return 1
import json, sys
path, np, accum = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recs = [json.loads(l) for l in open(path)]
def need(cond, what):
    if not cond:
        print(f"FAIL: {path}: {what}: {json.dumps(recs)}"); sys.exit(1)
need(len(recs) == 2, "two attempts")
a, b = recs
need(a["nproc"] == 4 and a["failed_rank"] == 1 and a["rank_lost"] is True, "attempt 1 lost rank 1")
need("signal 9" in a["cause"], "attempt 1's cause names signal 9")
need(a["action"] == f"restart on {np} processes", f"attempt 1 restarted on {np}")
need(b["nproc"] == np and b["num_accumulation_steps"] == accum and b["global_batch_size"] == 8, "attempt 2's layout")
need(b["resumed_from_iteration"] is not None and b["resumed_from_iteration"] >= 8, "attempt 2 resumed from step 8 or later")
need(b["action"] == "finished" and b["cause"] is None, "attempt 2 finished")
print(f"attempt 1: {a['cause']} after {a['seconds']} s; attempt 2 on {b['nproc']} resumed from iteration {b['resumed_from_iteration']}")
EOF
  grep -q "^meshflow launch: attempt 1 on 4 processes failed (rank 1 died" "$work/$name.err" ||
    { echo "FAIL ($name): no restart line on the launcher's stderr"; cat "$work/$name.err"; return 1; }
}

for run in "r4 4 1" "r2 2 2"; do
  set -- $run
  name=$1 np=$2 accum=$3
  flags=()
  [ "$np" = 2 ] && flags=(--min-nproc 2)
  if ! launch_and_kill "$name" "${flags[@]}"; then fail=1; continue; fi
  check_log "$name" "$np" "$accum" || fail=1
  if ! d=$(compare "$work/$name/metrics.jsonl"); then echo "$d"; echo "FAIL ($name): losses after the restart"; fail=1; continue; fi
  if ! b=$(compare "$work/$name.before" some); then echo "$b"; echo "FAIL ($name): losses before the kill"; fail=1; continue; fi
  logged=$(wc -l < "$work/$name.before")
  from=$(grep -o '"resumed_from_iteration":[0-9][0-9]*' "$work/$name/launch.jsonl" | cut -d: -f2)
  [ "$logged" -gt "$from" ] || { echo "FAIL ($name): no step re-run (killed after step $logged, resumed from $from)"; fail=1; }
  echo "$name: restarted on $np ranks (accumulation $accum) from step $from, steps $((from + 1))-$logged run twice:" \
       "max |loss - uninterrupted| = $d over $steps steps (first attempt's $logged steps: $b)"
done
# ---- A stop signal, 2 ranks: SIGUSR1 to mpirun (which passes it on to every rank; Slurm sends it
# with --signal) and SIGTERM to `meshflow launch` (passed on to the job as SIGUSR1) stop every rank
# after the same step: its checkpoint, one line, exit 0, no restart; the resume logs the losses of
# an uninterrupted run.
small=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
       model.num_layers=1 model.hidden_size=16 model.num_attention_heads=2 model.max_seq_length=16 data.seq_length=16
       train.train_micro_batch_size=2 train.log_period=1 train.evaluation.enabled=false train.checkpointer.period=0
       train.train_iter=100000)
stop_end=400  # the resumed and the uninterrupted runs end here: a busy machine may run 80+ tiny steps before the signal lands
$launcher -np 2 "$bin" train "${small[@]}" train.exit_iter=$stop_end "train.output_dir=$work/stop_ref" > "$work/stop_ref.log" 2>&1 ||
  { echo "FAIL: the 2-rank reference run exited non-zero"; tail -5 "$work/stop_ref.log"; fail=1; }
for how in mpirun_usr1 launch_term; do
  out=$work/stop_$how
  if [ "$how" = mpirun_usr1 ]; then
    $launcher -np 2 "$bin" train "${small[@]}" "train.output_dir=$out" > "$out.out" 2> "$out.err" &
    sig=USR1
  else
    "$bin" launch --nproc 2 --launcher "$launcher" "${small[@]}" "train.output_dir=$out" > "$out.out" 2> "$out.err" &
    sig=TERM
  fi
  job=$!
  for i in $(seq 1 1200); do [ "$(cat "$out/metrics.jsonl" 2> /dev/null | wc -l)" -ge 3 ] && break; sleep 0.05; done
  kill -$sig "$job"
  wait "$job"
  rc=$?
  job=""
  step=$(sed -n 's/^meshflow: received SIGUSR1 at step \([0-9]*\): saved checkpoint .*, exiting$/\1/p' "$out.err")
  ckpt=$out/checkpoints/iter_$(printf %07d "${step:-0}")
  if [ "$rc" -ne 0 ] || [ -z "$step" ] || [ "$(grep -c '^meshflow: received' "$out.err")" -ne 1 ] ||
     grep -q "failed or died\|error" "$out.err" || [ ! -f "$ckpt/metadata.json" ] || [ "$step" -ge "$stop_end" ]; then
    echo "FAIL ($how): exit $rc, stopped at step '$step' (want one line and a checkpoint before step $stop_end):"
    cat "$out.err"; ls "$out/checkpoints" 2> /dev/null; fail=1; continue
  fi
  if [ "$how" = launch_term ]; then
    grep -q '"action":"stopped"' "$out/launch.jsonl" && [ "$(wc -l < "$out/launch.jsonl")" -eq 1 ] &&
      grep -q "^meshflow launch: stopped by signal 15" "$out.err" ||
      { echo "FAIL ($how): launch.jsonl or the launch's line:"; cat "$out/launch.jsonl" "$out.err"; fail=1; }
  fi
  $launcher -np 2 "$bin" train "${small[@]}" train.resume=true train.exit_iter=$stop_end "train.output_dir=$out" \
    > "$out.resume" 2>&1 || { echo "FAIL ($how): the resume exited non-zero"; tail -5 "$out.resume"; fail=1; continue; }
  if [ "$(losses "$out/metrics.jsonl")" != "$(losses "$work/stop_ref/metrics.jsonl")" ] ||
     [ "$(losses "$out/metrics.jsonl" | wc -l)" -ne "$stop_end" ]; then
    echo "FAIL ($how): stopped at step $step, the resume logs other losses than the uninterrupted run:"
    diff <(losses "$out/metrics.jsonl") <(losses "$work/stop_ref/metrics.jsonl") | head -5; fail=1; continue
  fi
  echo "$how: every rank stopped at step $step with its checkpoint; the resume matches the uninterrupted run to step $stop_end"
done

echo "wall time: $(($(date +%s) - t0)) s"
exit $fail
