#!/usr/bin/env bash
# Fails when a file under src/meshflow includes a header of a layer below its own in the layer
# table of docs/architecture/README.md (the rows between <!-- layers and <!-- /layers -->, first
# row the lowest; folders in one row form one layer). Prints each offending include.
# Usage: bash scripts/check_layers.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A rank
n=0
while IFS= read -r row; do
  n=$((n + 1))
  for folder in $(grep -o 'src/meshflow/[a-z_]*' <<< "$row"); do rank[${folder#src/meshflow/}]=$n; done
done < <(sed -n '/^<!-- layers/,/^<!-- \/layers/p' docs/architecture/README.md | grep '^| [a-z]' | grep 'src/meshflow/')
[ "$n" -gt 0 ] || { echo "check_layers: no layer table in docs/architecture/README.md"; exit 1; }
bad=0
for dir in src/meshflow/*/; do
  layer=$(basename "$dir")
  [ -n "${rank[$layer]:-}" ] || { echo "check_layers: folder src/meshflow/$layer is in no layer of docs/architecture/README.md"; bad=1; continue; }
  while IFS=: read -r file line target; do
    [ -n "$file" ] || continue
    [ -n "${rank[$target]:-}" ] || { echo "$file:$line: includes meshflow/$target/, a folder in no layer"; bad=1; continue; }
    if [ "${rank[$target]}" -gt "${rank[$layer]}" ]; then
      echo "$file:$line: $layer includes meshflow/$target/ (a layer above it)"; bad=1
    fi
  done < <(grep -rnoE '#include "meshflow/[a-z_]+/' "$dir" | sed -E 's|#include "meshflow/([a-z_]+)/|\1|')
done
[ "$bad" -eq 0 ] && echo "check_layers: every include of src/meshflow follows the layers of docs/architecture/README.md"
exit "$bad"
