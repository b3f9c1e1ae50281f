#!/usr/bin/env bash
# Crash-safe checkpoint saves, shown by killing them.
#
#  1. Kill trials: a small GPT-2 saving a checkpoint after every step (train.checkpointer.period=1,
#     max_to_keep=2, a wide hidden size so that the save takes most of the step) runs on 2 or 4
#     ranks, the layout changing from trial to trial (dp=2, tp=2 x pp=2, pp=2, dp=2 x tp=2). Each
#     trial waits for a random save (2 .. train_iter-2) to begin, waits a random part of a save's
#     duration more and kills one rank with SIGKILL (the victim cycles so that every rank index is
#     hit), lets mpirun end the job, then resumes (train.resume=true). Checked: the resume exits 0;
#     it starts from the iteration `checkpoints/latest` named after the kill, a checkpoint whose save
#     had finished (its folder complete, never a `.tmp` one); its losses equal the uninterrupted
#     reference run's of that layout (1e-5 relative; the reference is run once per layout); and when
#     the killed save left an unfinished folder, the resume's warning names it and the checkpoint it
#     resumed from instead. A kill counts as inside a save when, just before it, a save was under
#     way: a folder checkpoints/iter_*.tmp existed (shards, metadata, pruning), or the newest
#     folder was not yet named by `latest`.
#  2. Full disk: the run's folder on a tmpfs that holds two checkpoints and half of a third (root
#     only: skipped, with a message, where mounting is not permitted). The third save fails: the
#     run exits non-zero with one error line saying the disk is full while saving that checkpoint
#     (and which file), no unfinished folder or temporary is left, `latest` names the second
#     checkpoint; with the tmpfs enlarged the run resumes from it in place and logs the reference's
#     losses.
#
# Usage: save_kill_test.sh MESHFLOW_BINARY SOURCE_DIR MPIEXEC [--trials N] [--seed S] [--no-full-disk]
#   ctest runs 6 trials (4 on dp=2 and tp=2 x pp=2 with MESHFLOW_TEST_QUICK=1, the sanitizer build);
#   the long mode is e.g.
#   bash tests/save_kill_test.sh build/meshflow . mpirun --trials 60
# Prints the counts: trials, kills inside a save (and the save's phase), kills per rank, resumes OK,
# the largest loss difference.
set -uo pipefail
bin=$(realpath "$1")
src=$2
mpiexec=$3
shift 3
trials=6
[ "${MESHFLOW_TEST_QUICK:-0}" = 1 ] && trials=4
seed=$(date +%s)
full_disk=1
while [ $# -gt 0 ]; do
  case $1 in
    --trials) trials=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --no-full-disk) full_disk=0; shift ;;
    *) echo "unknown argument $1"; exit 2 ;;
  esac
done
RANDOM=$seed
work=$(mktemp -d)
mnt=""
job=""
cleanup() {
  [ -n "$job" ] && kill -9 "$job" 2> /dev/null
  [ -n "$mnt" ] && umount "$mnt" 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cd "$src" || exit 1
export OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
echo "seed $seed, $trials trials"

source tests/tiny_corpus.sh
tiny_corpus "$bin" "$work" 100
T=10  # steps of every run; a checkpoint after each
args=(configs/gpt2/tiny.yaml tokenization.tokenizer=byte model.vocab_size=257 "data.data_prefix=$work/c_text_document"
      model.num_layers=2 model.hidden_size=256 model.num_attention_heads=4 model.ffn_hidden_size=512
      model.max_seq_length=16 data.seq_length=15 train.train_iter=$T train.global_batch_size=2
      train.train_micro_batch_size=1 train.log_period=1 train.evaluation.enabled=false
      train.checkpointer.period=1 train.checkpointer.max_to_keep=2)
layouts=(dp2 tp2pp2 pp2 dp2tp2)
[ "${MESHFLOW_TEST_QUICK:-0}" = 1 ] && layouts=(dp2 tp2pp2)  # still every rank index in 4 trials
declare -A np=([dp2]=2 [tp2pp2]=4 [pp2]=2 [dp2tp2]=4)
declare -A lay=([dp2]="" [tp2pp2]="train.dist.tensor_parallel_size=2 train.dist.pipeline_parallel_size=2"
                [pp2]="train.dist.pipeline_parallel_size=2" [dp2tp2]="train.dist.tensor_parallel_size=2")
launch() {  # layout, output dir, extra overrides...: starts the run in the background ($job)
  local l=$1 out=$2
  shift 2
  # shellcheck disable=SC2086
  "$mpiexec" --allow-run-as-root --oversubscribe -np "${np[$l]}" "$bin" train "${args[@]}" ${lay[$l]} \
    "train.output_dir=$out" "$@" > "$out.log" 2>&1 &
  job=$!
}
finish() {  # waits for $job (at most 120 s); its exit status
  local start=$SECONDS rc
  while kill -0 "$job" 2> /dev/null && [ $((SECONDS - start)) -lt 120 ]; do sleep 0.05; done
  if kill -0 "$job" 2> /dev/null; then
    echo "FAIL: a job still runs after 120 s"; kill -9 "$job"; fail=1
  fi
  wait "$job"
  rc=$?
  job=""
  return $rc
}
losses() { grep -o '"loss":[^,}]*' "$1" | cut -d: -f2; }
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
# nap SECONDS: a sleep without starting a process (a read from a FIFO nobody writes, timing out).
mkfifo "$work/never"
exec 9<> "$work/never"
nap() { read -r -t "$1" -u 9; }
max_diff=0
compare_losses() {  # reference metrics, run metrics, name: 1e-5 relative; updates max_diff
  local d
  if [ "$(losses "$2" | wc -l)" -ne "$T" ]; then
    echo "FAIL: $3 logged $(losses "$2" | wc -l) losses, not $T"; return 1
  fi
  d=$(paste <(losses "$1") <(losses "$2") | awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d
        s = $1 < 0 ? -$1 : $1; if (d > 1e-5 * (s > 1 ? s : 1)) bad = 1 } END { printf "%g %d", m, bad }')
  max_diff=$(awk -v a="$max_diff" -v b="${d% *}" 'BEGIN { print (b > a ? b : a) }')
  if [ "${d#* }" != 0 ]; then
    echo "FAIL: $3 does not log the uninterrupted run's losses:"; paste <(losses "$1") <(losses "$2"); return 1
  fi
}

# References: each layout once, uninterrupted, timing how long a save takes (the share of the
# time after the first checkpoint during which a save's folder exists, over the saves).
declare -A save_ms
for l in "${layouts[@]}"; do
  ref=$work/ref_$l
  launch "$l" "$ref"
  ck=$ref/checkpoints
  while kill -0 "$job" 2> /dev/null && [ ! -e "$ck/latest" ]; do nap 0.005; done
  t0=$(now_ms) in=0 all=0
  while kill -0 "$job" 2> /dev/null; do
    compgen -G "$ck/iter_*.tmp" > /dev/null && in=$((in + 1))
    all=$((all + 1))
    nap 0.002
  done
  t1=$(now_ms)
  if ! finish; then echo "FAIL: reference run $l exited non-zero:"; tail -20 "$ref.log"; exit 1; fi
  save_ms[$l]=$(( (t1 - t0) * in / (all > 0 ? all : 1) / (T - 1) ))
  [ "${save_ms[$l]}" -lt 5 ] && save_ms[$l]=5
  echo "reference $l: ${np[$l]} ranks, $(du -sk "$ck/iter_$(printf %07d $T)" | cut -f1) KB a checkpoint, a save ~${save_ms[$l]} ms" \
       "of ~$(( (t1 - t0) / (T - 1) )) ms a step"
done

# Kill trials.
inside=0 resumed=0 partial_left=0 warned=0 interrupted=0
declare -A by_rank phases
c2=0 c4=0
for ((t = 0; t < trials; t++)); do
  l=${layouts[$((t % ${#layouts[@]}))]}
  n=${np[$l]}
  if [ "$n" = 4 ]; then victim=$((3 - c4 % 4)); c4=$((c4 + 1)); else victim=$((c2 % 2)); c2=$((c2 + 1)); fi
  run=$work/t$t
  ck=$run/checkpoints
  delay=$((RANDOM % (save_ms[$l] * 5 / 4 + 1)))
  launch "$l" "$run"
  # The victim: the process of this run whose environment names its rank.
  pid=""
  for _ in $(seq 1 600); do
    for p in $(pgrep -f "train.output_dir=$run\$"); do
      [ "$p" = "$job" ] && continue
      tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim" && pid=$p
    done
    [ -n "$pid" ] && break
    sleep 0.05
  done
  # A save from 2 to T-1 not yet begun (the run may be past the first ones by now).
  done_iter=0
  read -r named 2> /dev/null < "$ck/latest" && done_iter=$((10#${named#iter_}))
  first=$((done_iter + 2 > 2 ? done_iter + 2 : 2))
  target=$((first >= T - 1 ? T - 1 : first + RANDOM % (T - first)))
  # Wait for save `target` to begin, then `delay` ms. When that save has ended by then (saves vary
  # in length), the next one is tried with a shorter delay, drawn anew, up to save T-1.
  while :; do
    tname=$(printf 'iter_%07d' "$target")
    while kill -0 "$job" 2> /dev/null && [ ! -e "$ck/$tname.tmp" ] && [ ! -e "$ck/$tname" ]; do
      named=iter_0
      read -r named 2> /dev/null < "$ck/latest"
      [ $((10#${named#iter_})) -ge "$target" ] && break
      nap 0.001
    done
    nap "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    # Just before the kill: which save is under way, and how far it got. shards: writing them;
    # metadata: rank 0 writing metadata.json or renaming; latest: the folder in place, `latest` not
    # yet replaced; pruning: removing the oldest checkpoint.
    phase=between
    named=$(cat "$ck/latest" 2> /dev/null)
    inflight=${named#iter_}
    for d in "$ck"/iter_*; do
      [ -e "$d" ] || continue
      n=${d##*/}
      case $n in
        *.pruned.tmp | *.replaced.tmp) phase=pruning ;;
        *.tmp) if [ -e "$d/metadata.json" ]; then phase=metadata; else phase=shards; fi; inflight=${n:5:7} ;;
        *) [[ "$n" > "$named" ]] && phase=latest && inflight=${n:5:7} ;;
      esac
    done
    inflight=$((10#${inflight:-0}))
    [ "$phase" != between ] || [ "$target" -ge $((T - 1)) ] && break
    target=$((target + 1))
    delay=$((RANDOM % (delay / 2 + 1)))
  done
  [ -z "$pid" ] && { echo "FAIL: trial $t: rank $victim of $l not found"; fail=1; finish; continue; }
  kill -9 "$pid"
  before=$(cd "$ck" && echo *)
  finish && { echo "FAIL: trial $t: the job exited 0 after rank $victim was killed"; fail=1; }
  by_rank[$victim]=$((${by_rank[$victim]:-0} + 1))
  phases[$phase]=$((${phases[$phase]:-0} + 1))
  [ "$phase" != between ] && inside=$((inside + 1))
  killed_at=$inflight
  latest=$(cat "$ck/latest" 2> /dev/null)
  # Saves newer than `latest`: unfinished folders, or complete ones `latest` does not name yet.
  unfinished=$(cd "$ck" && for d in iter_*; do
    if [[ $d =~ ^iter_[0-9]+\.tmp$ ]]; then echo "$d (unfinished)"; elif [[ $d =~ ^iter_[0-9]+$ && "$d" > "$latest" ]]; then
      echo "$d (not yet named by latest)"; fi; done | head -1)
  [ -n "$unfinished" ] && partial_left=$((partial_left + 1))
  # What is complete now: folders with an iteration name and their metadata.
  complete=$(cd "$ck" && for d in iter_*; do [[ $d =~ ^iter_[0-9]+$ ]] && [ -e "$d/metadata.json" ] && echo "$d"; done)
  launch "$l" "$run" train.resume=true
  if ! finish; then
    echo "FAIL: trial $t ($l, rank $victim killed, $phase of save $inflight): the resume exited non-zero:"
    tail -20 "$run.log"; fail=1; continue
  fi
  from=$(grep -o 'from iteration [0-9]*' "$run.log" | tail -1 | grep -o '[0-9]*$')
  fname=$(printf 'iter_%07d' "${from:--1}")
  ok=1
  if [ "$fname" != "$latest" ] || ! grep -qx "$fname" <<< "$complete"; then
    echo "FAIL: trial $t: resumed from iteration ${from:-?}; latest named '$latest'; complete: $(echo $complete)"; ok=0
  fi
  if [ -n "$unfinished" ]; then
    warning=$(grep -m1 -F "meshflow: warning: resuming from $ck/$fname (a newer save did not finish: " "$run.log" | grep -F "$unfinished")
    if [ -n "$warning" ]; then
      warned=$((warned + 1))
      [ "$warned" = 1 ] && echo "  the resume said: ${warning//$work\//}"
    else
      echo "FAIL: trial $t: the unfinished $unfinished is not named by a warning:"; grep -i warn "$run.log"; ok=0
    fi
  fi
  compare_losses "$work/ref_$l/metrics.jsonl" "$run/metrics.jsonl" "trial $t ($l)" || ok=0
  [ "$ok" = 1 ] && resumed=$((resumed + 1)) || fail=1
  [ "${from:-0}" -lt "$killed_at" ] && interrupted=$((interrupted + 1))
  echo "trial $t: $l, rank $victim killed in save $inflight ($phase; then: $(echo $before)), latest after: $latest, resumed from iteration $from:" \
       "$([ "$ok" = 1 ] && echo ok || echo FAILED)"
  rm -rf "$run"
done
echo "kill trials: $trials, inside a save: $inside (shards: ${phases[shards]:-0}, metadata/rename: ${phases[metadata]:-0}," \
     "latest not yet replaced: ${phases[latest]:-0}, pruning: ${phases[pruning]:-0}; between saves: ${phases[between]:-0}), saves interrupted (resumed from the one before): $interrupted, newer unfinished save left: $partial_left" \
     "(warning shown: $warned); kills by rank: 0: ${by_rank[0]:-0}, 1: ${by_rank[1]:-0}, 2: ${by_rank[2]:-0}," \
     "3: ${by_rank[3]:-0}; resumes OK: $resumed/$trials; largest loss difference: $max_diff"
[ "$resumed" = "$trials" ] || fail=1

# Full disk.
if [ "$full_disk" = 1 ]; then
  mnt=$work/disk
  mkdir -p "$mnt"
  kb=$(du -sk "$work/ref_dp2/checkpoints/iter_$(printf %07d $T)" | cut -f1)
  size=$((kb * 5 / 2 + 64))
  if ! mount -t tmpfs -o "size=${size}k" tmpfs "$mnt" 2> /dev/null; then
    echo "full disk: skipped (cannot mount a tmpfs here; needs root)"
    mnt=""
  else
    run=$mnt/run
    launch dp2 "$run"
    if finish; then echo "FAIL: the run on a full disk exited 0"; fail=1; fi
    ck=$run/checkpoints
    line=$(grep -m1 -E "^meshflow: error: .*saving checkpoint $ck/iter_0000003 failed: out of disk space \(.*shard_0000[01]\.safetensors.*No space left on device.*\); the unfinished save was removed; $ck/latest still names iter_0000002, the last complete checkpoint( \[[^]]*\])?$" "$run.log")
    if [ -z "$line" ]; then
      echo "FAIL: no error line saying the disk is full while saving iter_0000003:"; cat "$run.log"; fail=1
    else
      echo "full disk: $line"
    fi
    [ "$(cat "$ck/latest")" = iter_0000002 ] || { echo "FAIL: latest names '$(cat "$ck/latest")', not iter_0000002"; fail=1; }
    left=$(ls -A "$ck" | tr '\n' ' ')
    [ "$left" = "iter_0000001 iter_0000002 latest " ] ||
      { echo "FAIL: the full disk's checkpoints folder holds: $left"; fail=1; }
    echo "full disk: $(df -k "$mnt" | awk 'NR == 2 { print $3 " of " $2 " KB used" }') after the failure; checkpoints/: $left"
    mount -o remount,size=$((size * 4))k "$mnt" || { echo "FAIL: cannot enlarge the tmpfs"; fail=1; }
    launch dp2 "$run" train.resume=true
    if ! finish; then
      echo "FAIL: the resume after the full disk exited non-zero:"; tail -20 "$run.log"; fail=1
    else
      from=$(grep -o 'from iteration [0-9]*' "$run.log" | tail -1 | grep -o '[0-9]*$')
      [ "$from" = 2 ] || { echo "FAIL: the resume after the full disk started from iteration $from, not 2"; fail=1; }
      compare_losses "$work/ref_dp2/metrics.jsonl" "$run/metrics.jsonl" "the resume after the full disk" || fail=1
      echo "full disk: resumed from iteration $from with the space back: losses as uninterrupted (largest difference $max_diff)"
    fi
  fi
fi
[ "$fail" = 0 ] && echo "PASS" || echo "FAIL"
exit "$fail"
