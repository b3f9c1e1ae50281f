#!/usr/bin/env bash
# `meshflow serve` end to end: trains a tiny byte-level GPT-2 for a few steps, serves its latest
# checkpoint on a free port, and checks /health and /v1/models; four concurrent completions (two
# streamed) from Python's http.client, run as one batch; malformed JSON, an unknown field and an
# oversize prompt (400 with OpenAI's error JSON); a streamed and a whole completion through curl;
# and that SIGTERM stops the server cleanly (exit status 0, its closing line).
# Usage: serve_test.sh MESHFLOW_BINARY SOURCE_DIR
set -uo pipefail
bin=$1
src=$2
python=/usr/bin/python3
work=$(mktemp -d)
server_pid=
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -KILL "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$work"
}
trap cleanup EXIT
cd "$src" || exit 1
fail=0
die() {
  echo "FAIL: $*"
  [ -f "$work/serve.log" ] && { echo "--- server log:"; tail -30 "$work/serve.log"; }
  exit 1
}

# ---- a tiny model: a byte-level GPT-2, 4 steps (the loader takes the run's latest checkpoint)
printf 'the cat sat on the mat.\n%%\na dog ran far away.\n%%\n' > "$work/corpus.txt"
for i in $(seq 1 40); do printf 'line %d of the tiny corpus, with some words.\n%%\n' "$i" >> "$work/corpus.txt"; done
"$bin" preprocess --input "$work/corpus.txt" --output-prefix "$work/c" --tokenizer byte > /dev/null ||
  die "preprocess"
cfg=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
     model.num_layers=1 model.hidden_size=32 model.num_attention_heads=2 model.ffn_hidden_size=64
     model.max_seq_length=64 data.seq_length=64 train.train_iter=4 train.train_micro_batch_size=2
     train.evaluation.enabled=false "train.output_dir=$work/run")
OMP_NUM_THREADS=2 "$bin" train "${cfg[@]}" > "$work/train.log" 2>&1 || { tail -5 "$work/train.log"; die "train"; }

# ---- the server, on a free port
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
OMP_NUM_THREADS=2 "$bin" serve "${cfg[@]}" --host 127.0.0.1 --port "$port" --max-batch 4 --batch-wait-ms 300 \
  > "$work/serve.log" 2>&1 &
server_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 1 600); do
  curl -sf "$url/health" > /dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || die "the server exited before answering /health"
  sleep 0.1
done
[ "$(curl -sf "$url/health")" = '{"status":"ok"}' ] || die "/health"

# ---- Python's http.client: concurrent requests, streamed and not, and refused ones
"$python" - "$port" <<'EOF' || fail=$((fail + 1))
import http.client, json, sys, threading

port = int(sys.argv[1])
errors = []

def check(cond, what):
    if not cond:
        errors.append(what)

def post(body, raw=False):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body if raw else json.dumps(body), {"Content-Type": "application/json"})
    return c, c.getresponse()

def whole(i):
    req = {"prompt": "the cat %d" % i, "max_tokens": 8, "temperature": 0}
    c, r = post(req)
    body = r.read().decode()
    check(r.status == 200, "request %d: status %d: %s" % (i, r.status, body))
    j = json.loads(body)
    check(j["object"] == "text_completion" and j["id"].startswith("cmpl-"), "request %d: header %s" % (i, body))
    ch = j["choices"][0]
    check(isinstance(ch["text"], str) and ch["index"] == 0 and ch["logprobs"] is None, "request %d: choice %s" % (i, ch))
    check(ch["finish_reason"] in ("length", "stop"), "request %d: finish_reason %s" % (i, ch["finish_reason"]))
    u = j["usage"]
    check(u["prompt_tokens"] == len(req["prompt"]), "request %d: prompt_tokens %s" % (i, u))
    check(1 <= u["completion_tokens"] <= 8 and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
          "request %d: usage %s" % (i, u))
    c.close()

def streamed(i):
    c, r = post({"prompt": "a dog %d" % i, "max_tokens": 8, "temperature": 0.8, "seed": i, "stream": True})
    check(r.status == 200, "stream %d: status %d" % (i, r.status))
    check(r.getheader("Content-Type", "").startswith("text/event-stream"), "stream %d: content type" % i)
    events = []
    while True:
        line = r.readline()
        if not line:
            break
        line = line.decode()
        if line.strip():
            check(line.startswith("data: "), "stream %d: line %r" % (i, line))
            events.append(line[len("data: "):].strip())
    check(events and events[-1] == "[DONE]", "stream %d: no [DONE] at the end: %s" % (i, events[-2:]))
    chunks = [json.loads(e) for e in events[:-1]]
    check(len(chunks) >= 1, "stream %d: no chunks" % i)
    for k, ch in enumerate(chunks):
        reason = ch["choices"][0]["finish_reason"]
        if k + 1 < len(chunks):
            check(reason is None, "stream %d: finish_reason %r before the last chunk" % (i, reason))
        else:
            check(reason in ("length", "stop"), "stream %d: last finish_reason %r" % (i, reason))
    c.close()

threads = [threading.Thread(target=whole, args=(i,)) for i in range(2)]
threads += [threading.Thread(target=streamed, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()

def refused(body, param, words, raw=False):
    c, r = post(body, raw)
    j = json.loads(r.read().decode())
    check(r.status == 400, "%s: status %d" % (words, r.status))
    e = j.get("error", {})
    check(e.get("type") == "invalid_request_error" and e.get("param") == param and "code" in e,
          "%s: error %s" % (words, e))
    check(words in e.get("message", ""), "%r not in %r" % (words, e.get("message")))
    c.close()

refused('{"prompt": "the cat", "max_tokens": ', None, "not valid JSON", raw=True)
refused({"prompt": "the cat", "bogus": 1}, "bogus", "unknown field `bogus`")
refused({"prompt": "x" * 60, "max_tokens": 10}, "prompt", "maximum sequence length of 64")

for e in errors:
    print("FAIL (python):", e)
sys.exit(1 if errors else 0)
EOF
grep -Eq "batch of [2-4]," "$work/serve.log" || { echo "FAIL: no batch of several requests in the log"; fail=$((fail + 1)); }

# ---- curl: a streamed completion and a whole one
curl -sN -H 'Content-Type: application/json' -d '{"prompt": "the mat", "max_tokens": 6, "stream": true}' \
  "$url/v1/completions" > "$work/stream.txt"
if [ "$(tail -n 2 "$work/stream.txt" | head -1)" != "data: [DONE]" ] || [ -n "$(tail -n 1 "$work/stream.txt")" ] ||
   grep -v '^$' "$work/stream.txt" | grep -qv '^data: '; then
  echo "FAIL: curl's streamed completion:"
  cat "$work/stream.txt"
  fail=$((fail + 1))
fi
code=$(curl -s -o "$work/whole.json" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"prompt": "the mat", "max_tokens": 6}' "$url/v1/completions")
[ "$code" = 200 ] && grep -q '"object":"text_completion"' "$work/whole.json" ||
  { echo "FAIL: curl's completion ($code): $(cat "$work/whole.json")"; fail=$((fail + 1)); }
code=$(curl -s -o "$work/bad.json" -w '%{http_code}' -d '{"prompt": ' "$url/v1/completions")
[ "$code" = 400 ] && grep -q '"type":"invalid_request_error"' "$work/bad.json" ||
  { echo "FAIL: curl's malformed JSON ($code): $(cat "$work/bad.json")"; fail=$((fail + 1)); }

# ---- SIGTERM stops it cleanly
kill -TERM "$server_pid"
wait "$server_pid"
rc=$?
server_pid=
[ "$rc" -eq 0 ] || { echo "FAIL: the server exited with status $rc after SIGTERM"; fail=$((fail + 1)); }
grep -q "serve: stopped: 6 requests answered, 4 refused" "$work/serve.log" ||
  { echo "FAIL: no closing line (6 answered, 4 refused) in the log:"; tail -5 "$work/serve.log"; fail=$((fail + 1)); }
lines=$(grep -c "^serve: cmpl-" "$work/serve.log")
[ "$lines" -eq 6 ] || { echo "FAIL: $lines request lines in the log, not 6"; fail=$((fail + 1)); }

if [ "$fail" -ne 0 ]; then
  echo "--- server log:"
  tail -30 "$work/serve.log"
  exit 1
fi
echo "serve_test: all checks passed"
