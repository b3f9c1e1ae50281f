#!/usr/bin/env bash
# Downloads (no install) the Debian 12 packages meshflow builds with into .gpudeps/, for a GPU
# machine that has the CUDA toolkit, a compiler and CMake but no package registry:
# scripts/gpu-check.sh unpacks them there (dpkg -x) and builds against them. Run here, on a
# machine that reaches Debian's mirror; carry .gpudeps along (about 20 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libdnnl2 libdnnl-dev libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0
      ocl-icd-libopencl1 libyaml-cpp0.7 libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libgtest-dev
      zlib1g zlib1g-dev libicu72 libicu-dev libsentencepiece0 libsentencepiece-dev libpng16-16 libpng-dev
      libjpeg62-turbo libjpeg62-turbo-dev libcpp-httplib0.11 libcpp-httplib-dev libssl3 libssl-dev
      libbrotli1)
mkdir -p .gpudeps
cd .gpudeps
rm -f ./*.deb
apt-get download "${pkgs[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "${pkgs[@]}"; }
ls -1 ./*.deb | wc -l | xargs echo "packages in .gpudeps:"
du -sh . | cut -f1 | xargs echo "size:"
