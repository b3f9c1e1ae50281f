# Sourced by the command-line tests: tiny_corpus BINARY WORK_DIR LINES writes a small text corpus
# and preprocesses it with the byte tokenizer into WORK_DIR/c_text_document.{bin,idx}.
tiny_corpus() {
  local bin=$1 work=$2 lines=$3 i
  printf 'the cat sat on the mat.\n%%\na dog ran far away.\n%%\n' > "$work/corpus.txt"
  for i in $(seq 1 "$lines"); do
    printf 'line %d of the small corpus, with some words and %d more.\n%%\n' "$i" "$((i * 7))" >> "$work/corpus.txt"
  done
  "$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null ||
    { echo "preprocess failed"; exit 1; }
}
