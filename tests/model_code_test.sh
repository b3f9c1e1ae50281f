#!/usr/bin/env bash
# The model folders contain no parallel code: a model is written once, on global tensors, and the
# layout is configuration. Fails, printing file:line, when a file in a model's folder
# (src/meshflow/models/<model>/) names
#   - tensor, pipeline, sequence or data parallelism, or a pipeline stage;
#   - ZeRO or its shards;
#   - a communicator or a collective (MPI, NCCL, all-reduce, all-gather, reduce-scatter, boxing);
#   - a parallel size or rank (tp, dp, pp, world size/rank, a Place's members): the model only
#     passes the Place its base gives it to its layers, so it cannot branch on the layout.
# or places pipeline stages itself, rounds for mixed precision or calls attention itself.
# Checks first that every pattern catches an example of what it forbids (a matcher that can't fail
# would make the test pass vacuously).
# Usage: bash tests/model_code_test.sh <repository root>
set -euo pipefail
root=${1:-$(dirname "$0")/..}
patterns=(
  '[Pp]arallel'                      # tensor/pipeline/sequence/data parallel(ism), parallel::
  '[Pp]ipeline|\b[Ss]tages?\b'       # pipeline stages
  '\bZeRO|[Zz]ero_?[0-9]|zero_shard|ZeroShard'
  '[Cc]ommunicator|\bcomm\b|comm::|\bMPI\b|\bmpi_|[Nn][Cc][Cc][Ll]'
  'all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|\bbox(_to|_axis)?\(|boxing'
  '\b(tp|dp|pp)(_[a-z]+)?\b|_(tp|dp|pp)\b|world_(size|rank)|num_ranks|\brank\(\)'
  '[Pp]lace[A-Za-z_]*(\(\))?(->|\.)[a-z_]+'  # a Place is passed on, never asked
)
examples=(
  'parallel::ParallelContext ctx; parallel::ColumnConv1D c;'
  'if (stage().first) x = embed(x); // pipeline'
  'ZeRO-3 gathers; zero_shards_.gather();'
  'comm::Communicator& c = *tp.comm;'
  'x = global::box_to(x, b, comms); all_reduce(y);'
  'const int64_t H = heads / tp_size;'
  'if (place->size() > 1) return y;'
)
for i in "${!patterns[@]}"; do
  if ! grep -qE "${patterns[$i]}" <<< "${examples[$i]}"; then
    echo "model_code_test: pattern '${patterns[$i]}' does not catch its example '${examples[$i]}'"; exit 1
  fi
done
dirs=("$root"/src/meshflow/models/*/)
[ "${#dirs[@]}" -gt 0 ] && [ -d "${dirs[0]}" ] || { echo "model_code_test: no model folders under $root/src/meshflow/models"; exit 1; }
# GPT-NeoX's "parallel residual" (attention and MLP side by side in a block) is model structure,
# not parallelism: its names are blanked before matching (and the filter must not hide the rest).
strip_names() { sed -E 's/(use_)?parallel[_ ]residual|Residual::kParallel//g' "$1"; }
filtered=$(strip_names <(echo 'bool use_parallel_residual; Residual::kParallel; parallel::ParallelContext ctx;'))
grep -qE "${patterns[0]}" <<< "$filtered" || { echo "model_code_test: the residual filter hides tensor parallelism"; exit 1; }
bad=0 parallel=0
while IFS= read -r -d '' f; do
  for p in "${patterns[@]}"; do
    if strip_names "$f" | grep -nE "$p" | sed "s|^|$f:|" | grep .; then parallel=1; fi
  done
done < <(find "${dirs[@]}" -type f -print0)
# Every model is built whole, each part on its placement (models/model.h: a pipeline stage is a
# placement of layers, decided outside the model): no stage-placement branches and no nullable
# layer vectors, in every folder.
placement=(
  '\b(embedding|head|layer)_place\('
  '\b(blocks|layers)_\.resize\(|null: held by another rank'
)
placement_examples=(
  'if (const layers::Place* p = layer_place(l)) blocks_[l] = make(*p);'
  'blocks_.resize(static_cast<size_t>(c.num_layers));'
)
# Model code built from the shared pieces: no mixed-precision rounding and no attention calls
# (both inside the layers: layers/block.h), in every folder.
strict=(
  '\bround_to\('
  'global::attention\('
)
strict_examples=(
  'x = layers::round_to(global::add(x, y), dt);'
  'y = global::attention(q, k, v, opts);'
)
for i in "${!placement[@]}"; do
  if ! grep -qE "${placement[$i]}" <<< "${placement_examples[$i]}"; then
    echo "model_code_test: pattern '${placement[$i]}' does not catch its example '${placement_examples[$i]}'"; exit 1
  fi
done
for i in "${!strict[@]}"; do
  if ! grep -qE "${strict[$i]}" <<< "${strict_examples[$i]}"; then
    echo "model_code_test: pattern '${strict[$i]}' does not catch its example '${strict_examples[$i]}'"; exit 1
  fi
done
for d in "${dirs[@]}"; do
  name=$(basename "$d")
  hits=$(grep -rnE "$(IFS='|'; echo "${placement[*]}")" "$d" || true)
  if [ -n "$hits" ]; then
    echo "$hits"
    echo "model_code_test: $name places pipeline stages itself: build every part on its placement (models/model.h)"
    bad=1
  fi
  hits=$(grep -rnE "$(IFS='|'; echo "${strict[*]}")" "$d" || true)
  if [ -n "$hits" ]; then
    echo "$hits"
    echo "model_code_test: $name rounds or calls attention itself: build it from layers/block.h and models/decoder_lm.h"
    bad=1
  fi
done
if [ "$parallel" -ne 0 ]; then
  echo "model_code_test: the lines above name parallelism in a model folder; move it to the layers (src/meshflow/layers), the model base (models/model.h) or the runtime (src/meshflow/parallel)"
  exit 1
fi
[ "$bad" -eq 0 ] || exit 1
echo "model_code_test: ${#dirs[@]} model folders, no parallel code, all built from the shared block"
