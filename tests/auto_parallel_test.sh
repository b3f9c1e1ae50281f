#!/usr/bin/env bash
# graph.auto_parallel.enabled under mpirun -np 8: the run logs the layout the planner ranks first,
# writes it into its config.yaml (with the planner off), and its losses and gradient norms equal,
# bit for bit, a run of the same layout set by hand and a run of that config.yaml; a layout key the
# user sets is kept; the run's layout is one `meshflow plan` lists; `meshflow profile` writes a
# profile the planner reads; `meshflow plan --measure` trains plans and times them; no layout
# fitting the memory fails on every rank with one line.
# Usage: auto_parallel_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC
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
      model.max_seq_length=32 data.seq_length=31 train.train_iter=6 train.global_batch_size=16 train.log_period=1
      train.evaluation.enabled=false train.checkpointer.period=0)
mpi=("$mpiexec" --allow-run-as-root --oversubscribe -np 8)
losses() { grep -o '"\(loss\|grad_norm\)":[^,}]*' "$1/metrics.jsonl"; }

# 1. The planner's choice, by the run and by `meshflow plan`.
if ! "${mpi[@]}" "$bin" train "${args[@]}" graph.auto_parallel.enabled=true "train.output_dir=$work/auto" > "$work/auto.log" 2>&1; then
  echo "FAIL: the auto-parallel run exited non-zero:"; tail -20 "$work/auto.log"; exit 1
fi
chosen=$(sed -n 's/^auto_parallel: \(train\.dist\..*\)$/\1/p' "$work/auto.log")
[ -n "$chosen" ] || { echo "FAIL: the run did not log its layout:"; head "$work/auto.log"; exit 1; }
echo "chosen: $chosen"
planned=$("$bin" plan "${args[@]}" --nproc 8 | sed -n 's/^best: //p')
# The host profile's measured peak may order near-equal plans differently between processes;
# the layout must at least be one the planner lists as feasible.
"$bin" plan "${args[@]}" --nproc 8 --json > "$work/plans.jsonl"
python3 - "$work/plans.jsonl" "$chosen" <<'PY' || fail=1
import json, sys
chosen = dict(kv.split("=", 1) for kv in sys.argv[2].split())
plans = [json.loads(l) for l in open(sys.argv[1])]
if not any(p["keys"] == chosen for p in plans):
    print("FAIL: the run's layout is not among meshflow plan's feasible layouts"); sys.exit(1)
PY
[ "$planned" = "$chosen" ] || echo "note: meshflow plan ranks another layout first on this process: $planned"
grep -q "^  auto_parallel:" "$work/auto/config.yaml" && grep -A1 "^  auto_parallel:" "$work/auto/config.yaml" | grep -q "enabled: false" ||
  { echo "FAIL: config.yaml does not turn the planner off"; fail=1; }
for kv in $chosen; do
  key=${kv%%=*} value=${kv#*=}
  leaf=${key##*.}
  grep -Eq "^ *$leaf: [\"']?$value[\"']?( |$)" "$work/auto/config.yaml" || { echo "FAIL: config.yaml lacks $kv"; fail=1; }
done

# 2. The same layout by hand, and the run's own config.yaml, log the same losses and norms.
# shellcheck disable=SC2086
"${mpi[@]}" "$bin" train "${args[@]}" $chosen "train.output_dir=$work/hand" > "$work/hand.log" 2>&1 ||
  { echo "FAIL: the hand-set run exited non-zero:"; tail -20 "$work/hand.log"; fail=1; }
"${mpi[@]}" "$bin" train "$work/auto/config.yaml" "train.output_dir=$work/again" > "$work/again.log" 2>&1 ||
  { echo "FAIL: the run of config.yaml exited non-zero:"; tail -20 "$work/again.log"; fail=1; }
grep -q "^auto_parallel:" "$work/hand.log" "$work/again.log" && { echo "FAIL: a run without the planner planned"; fail=1; }
for other in hand again; do
  if [ "$(losses "$work/auto")" != "$(losses "$work/$other")" ] || [ -z "$(losses "$work/auto")" ]; then
    echo "FAIL: the $other run's losses differ from the auto-parallel run's:"; paste <(losses "$work/auto") <(losses "$work/$other"); fail=1
  fi
done

# 3. A layout key set by the user is a constraint, and that plan too trains as set by hand.
"${mpi[@]}" "$bin" train "${args[@]}" graph.auto_parallel.enabled=true train.dist.pipeline_parallel_size=2 \
  "train.output_dir=$work/pp2" > "$work/pp2.log" 2>&1 || { echo "FAIL: the pp=2 run failed"; tail "$work/pp2.log"; fail=1; }
grep -q "^auto_parallel: .*train.dist.pipeline_parallel_size=2 " "$work/pp2.log" || { echo "FAIL: pp=2 was not kept:"; grep auto_parallel "$work/pp2.log"; fail=1; }
chosen2=$(sed -n 's/^auto_parallel: \(train\.dist\..*\)$/\1/p' "$work/pp2.log")
echo "chosen with pp=2: $chosen2"
# shellcheck disable=SC2086
"${mpi[@]}" "$bin" train "${args[@]}" $chosen2 "train.output_dir=$work/pp2hand" > "$work/pp2hand.log" 2>&1 ||
  { echo "FAIL: the hand-set pp=2 run exited non-zero:"; tail -20 "$work/pp2hand.log"; fail=1; }
if [ "$(losses "$work/pp2")" != "$(losses "$work/pp2hand")" ] || [ -z "$(losses "$work/pp2")" ]; then
  echo "FAIL: the hand-set pp=2 run's losses differ:"; paste <(losses "$work/pp2") <(losses "$work/pp2hand"); fail=1
fi

# 4. `meshflow profile` on 4 ranks writes a profile the planner reads: positive rates (elementwise by size), a fit for
# every collective of every group size dividing 4, and a ranking made with it.
if ! "$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" profile --output "$work/host4.json" --repeats 1 > "$work/profile.log" 2>&1; then
  echo "FAIL: meshflow profile exited non-zero:"; tail "$work/profile.log"; fail=1
fi
python3 - "$work/host4.json" <<'PY' || fail=1
import json, sys
p = json.load(open(sys.argv[1]))
want = {f"{op}/{g}" for op in ("all_reduce", "reduce_scatter", "all_gather") for g in (2, 4)} | {"send_recv/2"}
missing = want - set(p["collectives"])
bad = [k for k in ("peak_flops", "gemm_flops", "memory_bandwidth", "memory_bytes", "core_share") if not p[k] > 0]
missing |= {f"loaded_alpha_s/{g}" for g in ("2", "4") if g not in p["loaded_alpha_s"]}
# Elementwise rates at 64 KB, 256 KB, 1, 4, 16 and 64 MB, the largest the memory bandwidth.
rates = {int(k): v for k, v in p.get("memory_rates", {}).items()}
if sorted(rates) != [65536 * 4**i for i in range(6)] or min(rates.values()) <= 0 or rates[65536 * 4**5] != p["memory_bandwidth"]:
    missing.add("memory_rates")
if missing or bad or p["ranks_per_node"] != 4:
    print("FAIL: the profile lacks", sorted(missing), "or has non-positive", bad); sys.exit(1)
PY
"$bin" plan "${args[@]}" --nproc 4 --hardware "$work/host4.json" > "$work/plan4.log" 2>&1 && grep -q "^best: " "$work/plan4.log" ||
  { echo "FAIL: planning with the measured profile:"; tail "$work/plan4.log"; fail=1; }

# 5. `meshflow plan --measure` under mpirun -np 4 trains the chosen plans in one job: the first
# ranked and the last, each with its measured step time and peak memory per rank, which the memory
# model predicts within 10%; and the summary.
"$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" plan "${args[@]}" --hardware "$work/host4.json" \
  --measure 2 --steps 3 > "$work/measure.log" 2>&1 || { echo "FAIL: plan --measure exited non-zero:"; tail "$work/measure.log"; fail=1; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" plan "${args[@]}" --hardware "$work/host4.json" \
  --measure 2 --steps 3 --json > "$work/measure.jsonl" 2> "$work/measure.err" || { echo "FAIL: plan --measure --json"; fail=1; }
"$bin" plan "${args[@]}" --nproc 4 --hardware "$work/host4.json" --json > "$work/plans4.jsonl"
python3 - "$work/measure.jsonl" "$work/plans4.jsonl" <<'PY' || fail=1
import json, sys
measured = [json.loads(l) for l in open(sys.argv[1])]
plans = [json.loads(l) for l in open(sys.argv[2])]
ranks = [m["rank"] for m in measured]
if ranks != [1, len(plans)]:
    print("FAIL: --measure 2 measured plans", ranks, "of", len(plans), "(want the first and the last)"); sys.exit(1)
for m in measured:
    p = plans[m["rank"] - 1]
    if m["layout"] != p["layout"] or not m["measured_s"] > 0:
        print("FAIL: measured", m, "against plan", p["layout"]); sys.exit(1)
    if abs(m["predicted_peak"] / m["measured_peak"] - 1) > 0.10:
        print("FAIL: the memory model misses", m["layout"], "by more than 10%:", m); sys.exit(1)
PY
grep -q "^measured 2 plans: the chosen plan (.*) took .* Kendall's tau" "$work/measure.log" &&
  grep -q "^memory: [0-9] of 2 plans within 10% of the measured peak" "$work/measure.log" ||
  { echo "FAIL: plan --measure printed no summary:"; tail "$work/measure.log"; fail=1; }

# 6. Nothing fits: one error line per rank, non-zero, no output folder.
if "${mpi[@]}" "$bin" train "${args[@]}" graph.auto_parallel.enabled=true graph.auto_parallel.memory_per_rank_gb=1e-6 \
    "train.output_dir=$work/none" > "$work/none.log" 2>&1; then
  echo "FAIL: a run with no feasible layout succeeded"; fail=1
fi
grep -q "graph.auto_parallel: no layout of .* fits on 8 ranks" "$work/none.log" || { echo "FAIL: no reason given:"; cat "$work/none.log"; fail=1; }
[ ! -e "$work/none" ] || { echo "FAIL: the failed run wrote its output folder"; fail=1; }

[ $fail = 0 ] && echo "auto-parallel: OK"
exit $fail
