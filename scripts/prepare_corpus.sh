#!/usr/bin/env bash
# The training corpus: Debian's fortune cookie databases (packages `fortunes` and
# `fortunes-min`, public domain / free). Each file below /usr/share/games/fortunes without an
# extension is plain text whose entries are separated by lines holding only "%" (~2.5 MB in
# all; the .dat files are strfile indexes and the .u8 files are links to the same text).
#
# This script installs the packages when missing (apt-get, as root) and prints the list of
# corpus files, one per line. The CLI tokenizes them (`meshflow preprocess`), which calls
# mf::preprocess(files, prefix, tokenizer) with TextSplit::kSeparatorLine and separator "%".
#   bash scripts/prepare_corpus.sh            # install if needed, list the files
set -euo pipefail
dir=/usr/share/games/fortunes
if ! dpkg -s fortunes fortunes-min >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "prepare_corpus.sh: packages fortunes fortunes-min are missing; run as root to install them" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fortunes fortunes-min >/dev/null
fi
# Plain-text databases: regular files without an extension (fortunes-min ships `fortunes`).
find "$dir" -maxdepth 1 -type f ! -name '*.*' | LC_ALL=C sort
