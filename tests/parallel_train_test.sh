#!/usr/bin/env bash
# Data, tensor, sequence and pipeline parallelism through the command line, under mpirun:
#  1. exactness: a small GPT (dropout on) trained 20 steps with dp=2, dp=4, tp=2, tp=4 and
#     dp=2 x tp=2, the tp layouts with and without sequence parallelism, logs the single-process
#     losses to 1e-5 relative, same global batch of 8 sequences (from metrics.jsonl); the byte
#     vocabulary (257) and the sequence (31) split unevenly over tp=2 and 4; pp=2 and pp=4 with
#     each schedule (gpipe, 1f1b, interleaved_1f1b with 2 chunks per rank), and dp=2 x tp=2 x
#     pp=2 on 8 ranks (with and without sequence
#     parallelism), log the losses of one process running the same micro-batches (the pipeline's
#     micro-batches are the accumulation steps); tp=2 with selective activation checkpointing
#     logs tp=2's losses (and norms) exactly; one process running the global batch of 8 as 4
#     micro-batches of 2 or 2 of 4 logs the losses of 1 of 8 (dropout draws by a sample's place in
#     the global batch, so a restart on fewer ranks with more accumulation continues exactly);
#     Every comparison of losses also compares the gradient norms (grad_norm, before clipping) at
#     the same tolerance; optim.clip_grad_norm_type=.inf (the largest |gradient|, maxed over tp
#     pieces, pp stages and ZeRO slices) with clipping active: dp=2 x tp=2 ZeRO-2 and pp=2 log the
#     one-process losses and norms;
#  2. every step's comm_bytes_est (ring-accounted bytes, mostly the gradient all-reduce) scales as
#     2(N-1)/N: dp=4 sends 1.5x what dp=2 sends, within 1% (the exact byte count is checked in
#     meshflow_mpi_tests);
#  1b. context parallelism (a sequence of 32): cp=2 and cp=4 in each mode (ring, all_to_all), cp=2 x
#     tp=2 with sequence parallelism, cp=2 x dp=2 with ZeRO-1 and ZeRO-3, dp=2 x cp=2 x tp=2 on 8
#     ranks and cp=2 x pp=2 log one process's losses and norms to 1e-5;
#  2b. ZeRO 1, 2 and 3 with dp=4, dp=2 x tp=2 and dp=2 x pp=2 log the unsharded runs' losses
#     to 1e-6 (model-state bytes per stage: tests/mpi/zero_memory_test.cpp);
#  2c. bf16 mixed precision on dp=2 x tp=2 logs the one-process bf16 losses to 2e-4 relative
#     (measured 2.4e-5) and gradient norms to 1e-2 (measured 3.3e-3): bf16 gradients reduced in
#     another order round differently;
#  3. tp=2, pp=2, dp=2 x tp=2 ZeRO-1 and dp=2 x tp=2 ZeRO-3 runs stopped at step 10 (every rank
#     writing its own checkpoint pieces) and resumed log the uninterrupted runs' losses bit for
#     bit; a dp=2 x tp=2 x pp=2 ZeRO-1 checkpoint resumes under dp=4 and under pp=4 to 1e-6; a
#     tp=2 x pp=2 checkpoint evaluates on one process to the run's own validation loss;
#  4. a world size that does not match train.dist, or a tp size that does not divide the heads,
#     fails on every rank with one error line each, before any work (no output directory).
# Usage: parallel_train_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
set -uo pipefail
bin=$1
src=$2
mpiexec=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
fail=0
export OMP_NUM_THREADS=1

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 200
args=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=4 model.hidden_size=32 model.num_attention_heads=4 model.ffn_hidden_size=128
      model.max_seq_length=32 data.seq_length=31 train.train_iter=20 train.global_batch_size=8 train.log_period=1
      train.evaluation.enabled=false train.checkpointer.period=0 train.dist.grad_bucket_mb=0.01)

# MESHFLOW_TEST_QUICK=1 (the sanitizer build) runs a representative subset: one or two runs of
# each kind of parallelism, their references, and one stop/resume.
quick_set=" dp1 dp2 tp2sp dp2tp2 z3dp2tp2 one_mb2 pp2il z3r s32 cp2 "
skipped() { [ "${MESHFLOW_TEST_QUICK:-0}" = 1 ] && [[ "$quick_set" != *" $1 "* ]]; }

run() {  # name, ranks, micro batch, tp[, sequence parallel[, pp[, schedule[, virtual stages[, layers[, zero stage]]]]]]
  skipped "$1" && return 0
  local name=$1 np=$2 mb=$3 tp=$4 sp=${5:-false} pp=${6:-1} sched=${7:-1f1b} v=${8:-1} layers=${9:-4} zero=${10:-0}
  local out=$work/$1
  local launch=()
  [ "$np" -gt 1 ] && launch=("$mpiexec" --allow-run-as-root --oversubscribe -np "$np")
  if ! "${launch[@]}" "$bin" train "${args[@]}" train.train_micro_batch_size="$mb" train.dist.tensor_parallel_size="$tp" \
       train.dist.sequence_parallel="$sp" train.dist.pipeline_parallel_size="$pp" train.dist.pipeline_schedule="$sched" \
       train.dist.virtual_pipeline_size="$v" model.num_layers="$layers" train.zero_optimization.enabled="$([ "$zero" -gt 0 ] && echo true || echo false)" \
       train.zero_optimization.stage="$((zero > 0 ? zero : 1))" \
       "train.output_dir=$out" > "$work/log_$name" 2>&1; then
    echo "FAIL: training $name exited non-zero:"; tail -20 "$work/log_$name"; fail=1
  fi
}
field() {  # metrics file, key: one value per line
  grep -o "\"$2\":[^,}]*" "$1" | cut -d: -f2
}

run dp1 1 8 1
run dp2 2 4 1
run dp4 4 2 1
run tp2 2 8 2
run tp4 4 8 4
run dp2tp2 4 4 2
run tp2sp 2 8 2 true
run tp4sp 4 8 4 true
run dp2tp2sp 4 4 2 true
run one_mb2 1 2 1                  # 4 micro-batches of 2
run pp2gpipe 2 2 1 false 2 gpipe
run pp21f1b 2 2 1 false 2 1f1b
run pp4gpipe 4 2 1 false 4 gpipe
run pp41f1b 4 2 1 false 4 1f1b
run pp2il 2 2 1 false 2 interleaved_1f1b 2     # 2 chunks of 1 layer per rank
args+=("train.dist.custom_pipeline_stage_id=[0,0,0,1]")
run pp2custom 2 2 1 false 2 1f1b               # 3 layers on stage 0, 1 on stage 1
unset 'args[${#args[@]}-1]'
args+=(train.activation_checkpoint.enabled=true train.activation_checkpoint.granularity=selective)
run tp2sel 2 8 2                               # tp=2 recomputing the attention cores
unset 'args[${#args[@]}-1]'
unset 'args[${#args[@]}-1]'
run one_mb2_8 1 2 1 false 1 1f1b 1 8           # 8 layers
run pp4il 4 2 1 false 4 interleaved_1f1b 2 8   # 2 chunks of 1 layer per rank
run one_mb4 1 4 1                  # 2 micro-batches of 4
run dp2tp2pp2 8 2 2 false 2 1f1b
run dp2tp2pp2sp 8 2 2 true 2 1f1b
compare() {  # [-t tolerance] [-g grad_norm tolerance, default: the same] reference, runs...
  local tol=1e-5 gtol=
  if [ "$1" = -t ]; then tol=$2; shift 2; fi
  if [ "$1" = -g ]; then gtol=$2; shift 2; fi
  local ref=$1 name
  shift
  for name in "$@"; do
  skipped "$name" && continue
  local key t
  for key in loss grad_norm; do
  t=$tol
  [ "$key" = grad_norm ] && [ -n "$gtol" ] && t=$gtol
  n=$(field "$work/$name/metrics.jsonl" $key | wc -l)
  [ "$n" -eq 20 ] || { echo "FAIL: $name logged $n values of $key, want 20"; fail=1; }
  if ! paste <(field "$work/$ref/metrics.jsonl" $key) <(field "$work/$name/metrics.jsonl" $key) |
       awk -v name="$name" -v ref="$ref" -v tol="$t" -v key=$key '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > max) max = r
                          if (r > tol) { printf "FAIL: step %d: %s %s %s, %s %s %s (relative %.2e)\n", NR, ref, key, $1, name, key, $2, r; bad = 1 } }
                        END { printf "%s vs %s: %d steps, max relative %s difference %.2e\n", name, ref, NR, key, max; exit bad }'; then
    fail=1
  fi
  done
  done
}
compare dp1 dp2 dp4 tp2 tp4 dp2tp2 tp2sp tp4sp dp2tp2sp
compare one_mb2 pp2gpipe pp21f1b pp4gpipe pp41f1b pp2il pp2custom
compare one_mb2_8 pp4il
compare one_mb4 dp2tp2pp2 dp2tp2pp2sp
compare dp1 one_mb2 one_mb4      # the global batch of 8 as 1, 4 or 2 micro-batches: a sample's dropout is its place's
# Recomputation draws the attention dropout of the same logical heads: tp2's losses, bit for bit.
for key in loss grad_norm; do
  if ! skipped tp2sel && ! cmp -s <(field "$work/tp2/metrics.jsonl" $key) <(field "$work/tp2sel/metrics.jsonl" $key); then
    echo "FAIL: tp2sel (selective recomputation) does not log the $key values of tp2:"
    paste <(field "$work/tp2/metrics.jsonl" $key) <(field "$work/tp2sel/metrics.jsonl" $key); fail=1
  fi
done
# ZeRO 1, 2 and 3 (optimizer state; + gradients; + parameters sharded over dp) against the same
# layouts without it, to 1e-6.
run z1dp4 4 2 1 false 1 1f1b 1 4 1
run z2dp4 4 2 1 false 1 1f1b 1 4 2
run z3dp4 4 2 1 false 1 1f1b 1 4 3
run z1dp2tp2 4 4 2 false 1 1f1b 1 4 1
run z2dp2tp2 4 4 2 false 1 1f1b 1 4 2
run z3dp2tp2 4 4 2 false 1 1f1b 1 4 3
run dp2pp2 4 2 1 false 2 1f1b
run z1dp2pp2 4 2 1 false 2 1f1b 1 4 1
run z2dp2pp2 4 2 1 false 2 1f1b 1 4 2
run z3dp2pp2 4 2 1 false 2 1f1b 1 4 3
compare -t 1e-6 dp4 z1dp4 z2dp4 z3dp4
compare -t 1e-6 dp2tp2 z1dp2tp2 z2dp2tp2 z3dp2tp2
compare -t 1e-6 dp2pp2 z1dp2pp2 z2dp2pp2 z3dp2pp2
compare one_mb4 dp2pp2
skipped dp4 || paste <(field "$work/dp2/metrics.jsonl" comm_bytes_est) <(field "$work/dp4/metrics.jsonl" comm_bytes_est) |
  awk '{ r = $2 / $1; if (r < 1.5 * 0.99 || r > 1.5 * 1.01) { printf "FAIL: step %d: dp=4 sent %s bytes, dp=2 %s: ratio %.4f, want 1.5\n", NR, $2, $1, r; bad = 1 } }
       END { if (NR != 20) { print "FAIL: comm_bytes_est missing"; bad = 1 } exit bad }' || fail=1

# Context parallelism (32 positions, learned positions and dropout on): cp=2 and cp=4 in each
# mode, cp=2 x tp=2 with sequence parallelism, cp=2 x dp=2 with ZeRO-1 and ZeRO-3, dp=2 x cp=2 x
# tp=2 and cp=2 x pp=2 against one process on the same sequence.
args+=(data.seq_length=32)
run s32 1 8 1
run s32_mb2 1 2 1
args+=(train.dist.context_parallel_size=2)
run cp2 2 8 1
run cp2tp2sp 4 8 2 true
run cp2dp2z1 4 4 1 false 1 1f1b 1 4 1
run cp2dp2z3 4 4 1 false 1 1f1b 1 4 3
run dp2cp2tp2 8 4 2
run cp2pp2 4 2 1 false 2 1f1b
args+=(train.dist.context_parallel_mode=all_to_all)
run a2a2 2 8 1
unset 'args[${#args[@]}-1]'
unset 'args[${#args[@]}-1]'
args+=(train.dist.context_parallel_size=4)
run cp4 4 8 1
args+=(train.dist.context_parallel_mode=all_to_all)
run a2a4 4 8 1
unset 'args[${#args[@]}-1]'
unset 'args[${#args[@]}-1]'
unset 'args[${#args[@]}-1]'
compare s32 cp2 cp4 a2a2 a2a4 cp2tp2sp cp2dp2z1 cp2dp2z3 dp2cp2tp2
compare s32_mb2 cp2pp2

# The infinity norm, clipping every step (the norms are ~0.1-1): dp=2 x tp=2 with ZeRO-2 (slices
# over dp, pieces over tp) and pp=2 (stages) against one process.
args+=("optim.clip_grad_norm_type=.inf" optim.clip_grad_max_norm=0.05)
run inf1 1 8 1
run infz2dp2tp2 4 4 2 false 1 1f1b 1 4 2
run inf_mb2 1 2 1
run infpp2 2 2 1 false 2 1f1b
unset 'args[${#args[@]}-1]'
unset 'args[${#args[@]}-1]'
compare inf1 infz2dp2tp2
compare inf_mb2 infpp2
if ! skipped inf1; then
  cmp -s <(field "$work/dp1/metrics.jsonl" grad_norm) <(field "$work/inf1/metrics.jsonl" grad_norm) &&
    { echo "FAIL: optim.clip_grad_norm_type=.inf logs the L2 norms"; fail=1; }
  field "$work/inf1/metrics.jsonl" grad_norm | awk '$1 <= 0.05 { bad = 1 } END { exit bad }' ||
    { echo "FAIL: inf1: a step's largest |gradient| is within clip_grad_max_norm (nothing clipped)"; fail=1; }
fi

# bf16 mixed precision: dp=2 x tp=2 against one process (same global batch).
args+=(train.amp.enabled=true)
run amp1 1 8 1
run ampdp2tp2 4 4 2
unset 'args[${#args[@]}-1]'
# The gradient norms to 1e-2 (measured 3.3e-3; 2.9e-4 at step 1, where the weights are still
# equal): the norm sees every bf16 gradient element, which the other reduction order rounds
# differently by up to one bf16 ulp (2^-8 relative); f32 layouts agree to ~1e-7.
compare -t 2e-4 -g 1e-2 amp1 ampdp2tp2

# A run stopped at step 10 and resumed logs the uninterrupted run's losses, bit for bit: every
# rank saves its own pieces (tp boxes, pp stages, ZeRO slices) and reads them back.
check_resume() {  # name, uninterrupted run, ranks, overrides...
  skipped "$1" && return 0
  local name=$1 straight=$2 np=$3
  shift 3
  local cmd=("$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$bin" train "${args[@]}" "$@"
             "train.output_dir=$work/$name")
  "${cmd[@]}" train.exit_iter=10 > "$work/log_$name" 2>&1 && "${cmd[@]}" train.resume=true >> "$work/log_$name" 2>&1 ||
    { echo "FAIL: $name stop/resume exited non-zero:"; tail -20 "$work/log_$name"; fail=1; }
  local key
  for key in loss grad_norm; do
  if ! cmp -s <(field "$work/$straight/metrics.jsonl" $key) <(field "$work/$name/metrics.jsonl" $key); then
    echo "FAIL: $name resumed at step 10 does not log the $key values of $straight:"
    paste <(field "$work/$straight/metrics.jsonl" $key) <(field "$work/$name/metrics.jsonl" $key); fail=1
  fi
  done
}
check_resume tp2r tp2 2 train.train_micro_batch_size=8 train.dist.tensor_parallel_size=2
check_resume pp2r pp21f1b 2 train.train_micro_batch_size=2 train.dist.pipeline_parallel_size=2
check_resume z1r z1dp2tp2 4 train.train_micro_batch_size=4 train.dist.tensor_parallel_size=2 \
  train.zero_optimization.enabled=true
check_resume z3r z3dp2tp2 4 train.train_micro_batch_size=4 train.dist.tensor_parallel_size=2 \
  train.zero_optimization.enabled=true train.zero_optimization.stage=3

# Resharding: a dp=2 x tp=2 x pp=2 ZeRO-1 run stopped at step 10 resumes under tp=1 with dp=4, and
# under pp=4 (the same global micro-batches of 4 rows, 2 per step); each rank reads only the
# regions it holds from the 8 ranks' shard files. Steps 11-20 match the uninterrupted run to 1e-6.
if ! skipped reshard; then
  z1_3d=(train.train_micro_batch_size=2 train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2
         train.zero_optimization.enabled=true)
  "$mpiexec" --allow-run-as-root --oversubscribe -np 8 "$bin" train "${args[@]}" "${z1_3d[@]}" \
    "train.output_dir=$work/z1dp2tp2pp2" > "$work/log_z1dp2tp2pp2" 2>&1 &&
  "$mpiexec" --allow-run-as-root --oversubscribe -np 8 "$bin" train "${args[@]}" "${z1_3d[@]}" train.exit_iter=10 \
    "train.output_dir=$work/rs" > "$work/log_rs" 2>&1 ||
    { echo "FAIL: dp2 x tp2 x pp2 ZeRO-1 runs exited non-zero:"; tail -20 "$work/log_rs" "$work/log_z1dp2tp2pp2"; fail=1; }
  cp -r "$work/rs" "$work/rs_dp4" && cp -r "$work/rs" "$work/rs_pp4"
  "$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" train "${args[@]}" train.train_micro_batch_size=1 \
    train.resume=true "train.output_dir=$work/rs_dp4" > "$work/log_rs_dp4" 2>&1 &&
  "$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" train "${args[@]}" train.train_micro_batch_size=4 \
    train.dist.pipeline_parallel_size=4 train.resume=true "train.output_dir=$work/rs_pp4" > "$work/log_rs_pp4" 2>&1 ||
    { echo "FAIL: resharded resumes exited non-zero:"; tail -20 "$work/log_rs_dp4" "$work/log_rs_pp4"; fail=1; }
  compare -t 1e-6 z1dp2tp2pp2 rs_dp4 rs_pp4
fi

# A tp=2 x pp=2 (sequence-parallel) run's checkpoint, evaluated on one process: the run's own
# final validation loss (checkpoints are in the unsplit layout).
"$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" train "${args[@]}" train.train_micro_batch_size=2 \
  train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2 train.dist.sequence_parallel=true \
  train.train_iter=3 train.evaluation.enabled=true train.evaluation.eval_iter=2 "train.output_dir=$work/ev" > "$work/log_ev" 2>&1 ||
  { echo "FAIL: tp=2 x pp=2 run with evaluation exited non-zero:"; tail -20 "$work/log_ev"; fail=1; }
want=$(grep -o "val_loss [0-9.]*" "$work/log_ev" | tail -1)
got=$("$bin" eval "$work/ev/config.yaml" train.dist.tensor_parallel_size=1 train.dist.pipeline_parallel_size=1 \
      train.dist.sequence_parallel=false 2>&1 | grep -o "val_loss [0-9.]*")
if [ -z "$want" ] || [ "$want" != "$got" ]; then
  echo "FAIL: one-process eval of the tp=2 x pp=2 checkpoint gives '$got', the run gave '$want'"; fail=1
else
  echo "tp=2 x pp=2 checkpoint on one process: $got (the run's: $want)"
fi

# Bad set-ups fail before any work, nothing written, every rank with exactly one error line:
# the reason, or — for a rank the launcher ended because a faster one already failed — "terminated
# by the launcher"; at least one rank gives the reason.
expect_setup_error() {  # name, ranks, expected reason (grep regex), overrides...
  local name=$1 np=$2 want=$3
  shift 3
  "$mpiexec" --allow-run-as-root --oversubscribe -np "$np" "$bin" train "${args[@]}" "$@" "train.output_dir=$work/$name" \
    > "$work/out" 2> "$work/err"
  local rc=$? r ok=1
  for ((r = 0; r < np; r++)); do
    [ "$(grep -c "^meshflow: error: \[rank $r/$np\] " "$work/err")" -eq 1 ] || ok=0
  done
  grep -q "^meshflow: error: \[rank [0-9]*/$np\] $want" "$work/err" || ok=0
  if [ "$rc" -eq 0 ] || [ "$ok" -ne 1 ] || [ -e "$work/$name" ]; then
    echo "FAIL: $name (exit $rc, output dir exists: $([ -e "$work/$name" ] && echo yes || echo no)):"; cat "$work/err"; fail=1
  fi
}
expect_setup_error bad_mesh 2 "device mesh: .*does not equal the world size 2" train.dist.data_parallel_size=4
expect_setup_error bad_tp 3 "train.dist.tensor_parallel_size 3 must divide model.num_attention_heads (4)" \
  train.dist.tensor_parallel_size=3
[ "$fail" -eq 0 ] && echo "data-, tensor-, sequence- and pipeline-parallel CLI tests passed"
exit "$fail"
