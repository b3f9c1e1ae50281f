#!/usr/bin/env bash
# The planner against this machine, in one MPI job per (model, ranks): `mpirun -np N meshflow
# profile` measures the machine, then `mpirun -np N meshflow plan --hardware <that profile>
# --measure K` trains K of the feasible plans (0: every one; else spread over the ranking, the
# first included) for --steps steps each and prints each plan's predicted and measured step time
# and peak memory per rank, and the summary: the chosen plan's rank among the measured, its
# regret, Kendall's tau between the predicted and measured orders, the plans within 10% of their
# measured peak (bench/plan_rescore.py). Two models: the tiny GPT-2 of the quickstart (7.2M parameters, 4 layers) and a
# 30M GPT-2 (6 layers, hidden 384); global batch 16 x 128 tokens.
# Usage: bash bench/plan_measure.sh [--ranks "1 2 4 8"] [--models "tiny 30m"] [--plans 0] [--steps 6]
#          [--profile FILE] [--save DIR] [--resume] [--memory] [--rescore PREFIX]
#   --memory: the peaks only — 2 steps per plan, kept as DIR/<model>_<N>.memory.jsonl and scored
#   for memory alone (the peak does not need an idle machine; the step times are not a measurement);
#   --profile: a profile meshflow profile wrote for the same number of ranks (else it is measured);
#   --save DIR: keeps DIR/<model>_<N>.measured.jsonl (the measured plans, as --measure --json
#   prints them) and DIR/<model>_<N>.profile.json, to score a later planner on the same
#   measurements: meshflow plan ... --hardware DIR/x.profile.json --json > P.jsonl;
#   python3 bench/plan_rescore.py DIR/x.measured.jsonl P.jsonl
#   --resume: with --save, the plans already in DIR/<model>_<N>.<measured|memory>.jsonl are left out
#   (plan --skip) and the new ones appended, line by line: a sweep longer than a sitting goes on
#   where the last one stopped (gunzip a kept file into DIR to extend it);
#   --rescore PREFIX: measures nothing; plans with PREFIX.<model>_<N>.profile.json and scores the
#   plans against PREFIX.<model>_<N>.measured.jsonl[.gz] (bench/plan_data/<machine>), for each
#   model and rank count kept there (and with each PREFIX.<model>_<N>.retest*.jsonl.gz, a second
#   measurement of the same plans, how well the machine repeats its own order: plan_rescore.py --retest)
#   (a Release build in build/, the corpus data/fortunes_text_document.* as scripts/quickstart.sh
#   makes it; nothing else running: the times are the measurement)
set -euo pipefail
cd "$(dirname "$0")/.."
ranks="1 2 4 8" models="tiny 30m" plans=0 steps=6 profile='' out='' rescore='' kind=measured resume=''
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --plans) plans=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --profile) profile=$(realpath "$2"); shift 2 ;;
    --save) out=$(realpath -m "$2"); shift 2 ;;
    --rescore) rescore=$2; shift 2 ;;
    --memory) kind=memory steps=2; shift ;;
    --resume) resume=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -n "$out" ] || out=$work
mkdir -p "$out"
cp build/meshflow "$work/meshflow"  # the binary measured stays the same while the tree is rebuilt
mf=$work/meshflow
keys=(train.global_batch_size=16 train.train_micro_batch_size=1 train.dist.heartbeat=false)
model_keys() {
  case $1 in
    tiny) echo "" ;;
    30m) echo "model.num_layers=6 model.hidden_size=384 model.num_attention_heads=6 model.ffn_hidden_size=1536" ;;
    *) echo "unknown model $1 (tiny or 30m)" >&2; exit 2 ;;
  esac
}
if [ -n "$rescore" ]; then
  for n in $ranks; do
    for model in $models; do
      if [ -f "$rescore.${model}_$n.memory.jsonl.gz" ]; then
        echo "== $model on $n ranks, memory (kept: $rescore.${model}_$n.memory.jsonl.gz)"
        # shellcheck disable=SC2046
        "$mf" plan configs/gpt2/tiny.yaml "${keys[@]}" $(model_keys "$model") --memory-per-rank 1000 --nproc "$n" \
          --json > "$work/predicted.jsonl"
        python3 bench/plan_rescore.py "$rescore.${model}_$n.memory.jsonl.gz" "$work/predicted.jsonl" --memory
      fi
      measured=$rescore.${model}_$n.measured.jsonl
      [ -f "$measured" ] || measured=$measured.gz
      [ -f "$measured" ] || continue
      echo "== $model on $n ranks (kept: $measured)"
      # shellcheck disable=SC2046
      "$mf" plan configs/gpt2/tiny.yaml "${keys[@]}" $(model_keys "$model") --hardware "$rescore.${model}_$n.profile.json" \
        --memory-per-rank 1000 --nproc "$n" --json > "$work/predicted.jsonl"
      retest=()
      for again in "$rescore.${model}_$n".retest*.jsonl.gz; do
        [ -f "$again" ] && retest+=(--retest "$again")
      done
      python3 bench/plan_rescore.py "$measured" "$work/predicted.jsonl" "${retest[@]}"
    done
  done
  exit 0
fi
for n in $ranks; do
  hw=$profile
  if [ -z "$hw" ]; then
    hw=$work/profile_$n.json
    mpirun --oversubscribe -np "$n" "$mf" profile --output "$hw" < /dev/null | grep -v "^profile: GEMM"
  fi
  for model in $models; do
    echo "== $model on $n ranks"
    # shellcheck disable=SC2046
    args=(configs/gpt2/tiny.yaml "${keys[@]}" $(model_keys "$model") --hardware "$hw" --memory-per-rank 1000)
    measured=$out/${model}_$n.$kind.jsonl
    if [ -n "$resume" ] && [ -s "$measured" ]; then
      echo "(resuming: the $(wc -l < "$measured") plans of $measured are left out)"
      mpirun --oversubscribe -np "$n" "$mf" plan "${args[@]}" --measure "$plans" --steps "$steps" --skip "$measured" \
        --json < /dev/null >> "$measured"
    else
      mpirun --oversubscribe -np "$n" "$mf" plan "${args[@]}" --measure "$plans" --steps "$steps" --json < /dev/null > "$measured"
    fi
    "$mf" plan "${args[@]}" --nproc "$n" --json > "$work/predicted.jsonl"
    if [ $kind = memory ]; then
      python3 bench/plan_rescore.py "$measured" "$work/predicted.jsonl" --memory
    else
      python3 bench/plan_rescore.py "$measured" "$work/predicted.jsonl" --table
      cp "$hw" "$out/${model}_$n.profile.json"
    fi
  done
done
