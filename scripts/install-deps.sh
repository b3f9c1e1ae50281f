#!/usr/bin/env bash
# Installs the Debian 12 packages meshflow builds with, if any is missing (needs root).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache libopenblas-openmp-dev libdnnl-dev libgtest-dev libomp-dev
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev openmpi-bin libopenmpi-dev zlib1g-dev libicu-dev
      libsentencepiece-dev sentencepiece libpng-dev libjpeg62-turbo-dev libcpp-httplib-dev
      chromium python3-pil  # these two: tests/report_browser_test.sh (headless page check)
      clang libclang-rt-14-dev llvm)  # scripts/fuzz.sh: clang, its libFuzzer runtime, llvm-symbolizer
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
