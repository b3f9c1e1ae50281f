#!/usr/bin/env bash
# `meshflow report` in a browser: a short profiled 4-rank run (dp 1 x tp 2 x pp 2, 1F1B over 4
# micro-batches, steps 3 and 4 traced) of a tiny byte-level GPT-2 (its trace.json checked as
# trace-event JSON with every rank's micro-batches, metrics.jsonl's per-rank figures), its report opened in headless
# Chromium (no network), a screenshot of the whole page taken, and tests/report_page_check.py
# checking that every figure's plot area holds drawn data, that every SVG file is well-formed and
# inline in the page, and that Chromium logged no console message. The screenshot is kept:
# OUT_DIR/report_screenshot.png (default build/test-artifacts/report/), its path printed.
#
# The check must be able to fail: it is then run on three spoilt copies of the page (one figure's
# data removed, one figure's <svg> broken with its SVG file cut short, a console.error injected),
# and each must be caught.
#
# Usage: report_browser_test.sh MESHFLOW_BINARY REPO_ROOT [OUT_DIR]
#   MPIEXEC (environment): the MPI launcher (default: mpirun).
#   MESHFLOW_REPORT_RUN_DIR (environment): report on this run folder instead of training one.
# Exit 77 (skipped) when Chromium or Python's PIL is not installed.
set -uo pipefail
bin=$(realpath "$1")
src=$(realpath "$2")
out_dir=${3:-$src/build/test-artifacts/report}
mpiexec=${MPIEXEC:-mpirun}
chromium=$(command -v chromium || true)
[ -z "$chromium" ] && [ -x /usr/bin/chromium ] && chromium=/usr/bin/chromium
if [ -z "$chromium" ]; then
  echo "SKIP: chromium is not installed (apt-get install chromium)"; exit 77
fi
if ! /usr/bin/python3 -c "import PIL" 2>/dev/null; then
  echo "SKIP: Python's PIL is not installed (apt-get install python3-pil)"; exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1
figures=(loss lr grad_norm tokens_per_sec mfu memory step_time timeline)

# 1. The run.
run=${MESHFLOW_REPORT_RUN_DIR:-}
if [ -z "$run" ]; then
  source tests/tiny_corpus.sh
  tiny_corpus "$bin" "$work" 40
  run=$work/run
  if ! "$mpiexec" --allow-run-as-root --oversubscribe -np 4 "$bin" train configs/gpt2/tiny.yaml \
      tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document" \
      model.num_layers=2 model.hidden_size=32 model.num_attention_heads=4 model.ffn_hidden_size=64 \
      model.max_seq_length=64 data.seq_length=64 train.train_iter=6 train.log_period=2 \
      train.train_micro_batch_size=2 train.num_accumulation_steps=4 train.evaluation.eval_period=3 \
      train.evaluation.eval_iter=2 train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2 \
      train.profile.enabled=true train.profile.start_step=3 train.profile.num_steps=2 \
      "train.output_dir=$run" > "$work/train.log" 2>&1; then
    echo "FAIL: the 4-rank training run exited non-zero:"; tail -5 "$work/train.log"; exit 1
  fi
fi
for f in metrics.jsonl config.yaml trace.json; do
  [ -f "$run/$f" ] || { echo "FAIL: the run folder $run has no $f"; exit 1; }
done

# The run's own files: trace.json is valid trace-event JSON with every rank's track, each holding
# the forward and backward of every micro-batch of both profiled steps inside its step; every
# training line of metrics.jsonl holds every rank's figures at its place in the mesh.
if [ -z "${MESHFLOW_REPORT_RUN_DIR:-}" ] && ! /usr/bin/python3 - "$run" <<'EOF'
import json, sys
run = sys.argv[1]
trace = json.load(open(run + "/trace.json"))
ev = trace["traceEvents"]
other = trace["otherData"]
assert (other["world_size"], other["tp"], other["pp"], other["micro_batches"]) == (4, 2, 2, 4), other
for e in ev:
    assert e["ph"] in ("X", "C", "M") and isinstance(e["pid"], int) and "name" in e, e
    if e["ph"] == "X":
        assert e["dur"] >= 0 and e["ts"] >= 0 and "cat" in e, e
for pid in range(4):
    steps = [e for e in ev if e["pid"] == pid and e.get("cat") == "step"]
    assert [s["args"]["step"] for s in steps] == [3, 4], (pid, steps)
    for kind in ("forward", "backward"):
        spans = [e for e in ev if e["pid"] == pid and e.get("cat") == kind]
        assert sorted(e["args"]["micro_batch"] for e in spans) == [0, 0, 1, 1, 2, 2, 3, 3], (pid, kind)
        for e in spans:
            assert any(s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] for s in steps), e
    assert any(e["pid"] == pid and e.get("cat") == "comm" and e["tid"] >= 1 for e in ev), pid
    assert any(e["pid"] == pid and e["ph"] == "C" and e["name"] == "memory" for e in ev), pid
lines = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"loss"' in l]
assert lines, "no training line"
for l in lines:
    ranks = l["ranks"]
    assert [(r["rank"], r["stage"], r["tp"]) for r in ranks] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)], ranks
    assert all(r["step_time"] > 0 and r["mem_parameters"] > 0 for r in ranks), ranks
print("trace.json: %d events, 4 ranks; metrics.jsonl: every rank's figures on %d lines" % (len(ev), len(lines)))
EOF
then
  echo "FAIL: the run's trace.json or metrics.jsonl is not what it should be"; exit 1
fi

# 2. The report.
if ! "$bin" report "$run" --output "$work/report" > "$work/report.log" 2>&1; then
  echo "FAIL: meshflow report exited non-zero:"; cat "$work/report.log"; exit 1
fi

# 3. Chromium: the DOM after the page's script ran (the figures' plot areas, the page's height),
# then a screenshot of the whole page; its console messages on stderr. Nothing from the network.
browse() {  # name, flags...
  local name=$1
  shift
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
    --no-first-run --disable-extensions --user-data-dir="$work/chromium-profile" \
    --host-resolver-rules="MAP * ~NOTFOUND" --enable-logging=stderr --v=0 "$@" 2>> "$work/$name.chromium.log"
}

# check_page DIR NAME: renders DIR/index.html, checks it; 0 when every check passes.
check_page() {
  local dir=$1 name=$2 height
  : > "$work/$name.chromium.log"
  browse "$name" --window-size=1400,1000 --dump-dom "file://$dir/index.html" > "$work/$name.dom.html" ||
    { echo "chromium --dump-dom failed"; return 1; }
  height=$(/usr/bin/python3 - "$work/$name.dom.html" <<'EOF'
import html, json, re, sys
m = re.search(r'<pre id="figure-rects"[^>]*>(.*?)</pre>', open(sys.argv[1], encoding="utf-8").read(), re.S)
try:
    print(int(json.loads(html.unescape(m.group(1)))["page_height"]) + 20)
except Exception:
    print(3000)
EOF
)
  browse "$name" --window-size="1400,$height" --screenshot="$work/$name.png" "file://$dir/index.html" > /dev/null ||
    { echo "chromium --screenshot failed"; return 1; }
  [ -f "$work/$name.png" ] || { echo "chromium wrote no screenshot"; return 1; }
  /usr/bin/python3 tests/report_page_check.py "$dir" "$work/$name.dom.html" "$work/$name.png" \
    "$work/$name.chromium.log" "${figures[@]}"
}

fail=0
if ! check_page "$work/report" page; then
  echo "FAIL: the report of $run did not render as it should"; fail=1
fi
mkdir -p "$out_dir"
cp "$work/page.png" "$out_dir/report_screenshot.png" 2>/dev/null &&
  echo "screenshot: $(realpath "$out_dir/report_screenshot.png")"

# 4. The check can fail: spoilt copies of the page must each be caught.
spoil() {  # name, python code editing `page` (the HTML) in the copy's folder
  local name=$1 code=$2
  rm -rf "${work:?}/$name"
  cp -r "$work/report" "$work/$name"
  /usr/bin/python3 - "$work/$name" <<EOF
import pathlib, re, sys
d = pathlib.Path(sys.argv[1])
page = (d / "index.html").read_text(encoding="utf-8")
$code
(d / "index.html").write_text(page, encoding="utf-8")
EOF
  if check_page "$work/$name" "$name" > "$work/$name.check.log" 2>&1; then
    echo "FAIL: the check passed a spoilt page ($name):"; cat "$work/$name.check.log"; fail=1
  else
    echo "caught the spoilt page ($name): $(grep -m1 '^FAIL' "$work/$name.check.log")"
  fi
}
# The loss figure's data group emptied (in the page and in loss.svg).
spoil empty_figure '
svg = (d / "loss.svg").read_text(encoding="utf-8")
empty = re.sub(r"<g class=\"data\">.*?</g>", "<g class=\"data\">\n</g>", svg, flags=re.S)
assert empty != svg
page = page.replace(svg, empty)
(d / "loss.svg").write_text(empty, encoding="utf-8")'
# The memory figure: its <svg> element misspelt in the page, memory.svg cut short.
spoil broken_svg '
svg = (d / "memory.svg").read_text(encoding="utf-8")
page = page.replace(svg, svg.replace("<svg ", "<svgx ", 1).replace("</svg>", "</svgx>"))
(d / "memory.svg").write_text(svg[: len(svg) // 2], encoding="utf-8")'
# A console error.
spoil console_error '
page = page.replace("</body>", "<script>console.error(\"injected error\");</script>\n</body>")'

[ "$fail" -eq 0 ] && echo "PASS: the report renders its ${#figures[@]} figures in Chromium"
exit "$fail"
