#!/usr/bin/env bash
# The cost of train.profile: the same run with its steps 3..N profiled and not profiled, in
# alternation (the machine is shared and noisy), compared by the mean step time of steps 3..N
# (metrics.jsonl, train.log_period=1). Prints each pair and the ratio of the means.
# Usage: bash bench/trace_overhead.sh [MESHFLOW_BIN] [PAIRS] [STEPS] [extra key=value ...]
#   e.g. bash bench/trace_overhead.sh build/meshflow 3 12
#        NP=2 bash bench/trace_overhead.sh build/meshflow 3 12 train.dist.pipeline_parallel_size=2
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/meshflow}
pairs=${2:-3}
steps=${3:-12}
shift $(( $# < 3 ? $# : 3 ))
np=${NP:-1}
extra=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launch=()
[ "$np" -gt 1 ] && launch=(mpirun --allow-run-as-root --oversubscribe -np "$np")
run() {  # run DIR PROFILE
  "${launch[@]}" "$bin" train configs/gpt2/tiny.yaml "train.output_dir=$1" "train.train_iter=$steps" train.log_period=1 \
    train.evaluation.enabled=false train.checkpointer.period=100000 "train.profile.enabled=$2" train.profile.start_step=3 \
    "train.profile.num_steps=$((steps - 2))" "${extra[@]}" > "$1.log" 2>&1 || { cat "$1.log"; exit 1; }
}
mean_step() {  # mean step_time of steps >= 3
  python3 -c "
import json, sys
t = [json.loads(l)['step_time'] for l in open(sys.argv[1]) if '\"loss\"' in l and json.loads(l)['step'] >= 3]
print(sum(t) / len(t))" "$1/metrics.jsonl"
}
echo "GPT-2 tiny (configs/gpt2/tiny.yaml), $np process(es), $steps steps, steps 3..$steps timed; $*"
on_sum=0; off_sum=0
for i in $(seq "$pairs"); do
  run "$work/off$i" false
  run "$work/on$i" true
  [ -s "$work/on$i/trace.json" ] || { echo "no trace.json"; exit 1; }
  off=$(mean_step "$work/off$i"); on=$(mean_step "$work/on$i")
  printf 'pair %d: step %.4f s without, %.4f s profiled (%+.1f%%), trace %s\n' "$i" "$off" "$on" \
    "$(python3 -c "print(100 * ($on / $off - 1))")" "$(du -h "$work/on$i/trace.json" | cut -f1)"
  on_sum=$(python3 -c "print($on_sum + $on)"); off_sum=$(python3 -c "print($off_sum + $off)")
done
python3 -c "print('profiling overhead: %+.1f%% of the step time (mean of %d pairs)' % (100 * ($on_sum / $off_sum - 1), $pairs))"
