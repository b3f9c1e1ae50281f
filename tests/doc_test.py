#!/usr/bin/env python3
"""The documentation's checks.

  doc_test.py lint SRC_DIR
      README.md at most 150 lines and every other page of docs/ at most 500; every relative link
      of README.md and docs/ leads to a file (and a heading of it, for #anchors); every path of
      the repository a page names in code (bench/..., scripts/..., configs/..., tests/...,
      src/..., fuzz/...) exists; the README and every guide but the generated config reference
      hold at least one runnable block.

  doc_test.py run SRC_DIR BUILD_DIR [PAGE ...]
      Runs the runnable blocks (fenced blocks opening with ```sh runnable) of README.md and
      docs/ (or of the PAGEs named), each page's blocks in order in a scratch folder of its own
      that holds the repository's configs, scripts, bench and data (with the fortunes corpus
      tokenized as the quickstart does) and `build` (BUILD_DIR), under a time bound per block,
      with one OpenMP thread per process (unless a block sets OMP_NUM_THREADS) and Open MPI
      allowed to run as root and to put more ranks than cores.
      A block marked ```sh runnable fails must exit non-zero with exactly one line on stderr
      (the command line's error line). Prints each block's output; exits 1 naming every block
      that failed (page and line).
"""
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

README_MAX_LINES = 150
PAGE_MAX_LINES = 500
BLOCK_TIMEOUT_S = 420
FENCE = re.compile(r"^(\s*)```(.*)$")
GENERATED = {"docs/guides/config-reference.md"}


def pages(src):
    out = ["README.md"]
    for root, _, files in os.walk(os.path.join(src, "docs")):
        for f in files:
            if f.endswith(".md"):
                out.append(os.path.relpath(os.path.join(root, f), src))
    return [out[0]] + sorted(out[1:])


def blocks(text):
    """(first line number, info words, code) of each fenced block."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info, start, body = m.group(2).split(), i + 1, []
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            body.append(lines[i])
            i += 1
        out.append((start, info, "\n".join(body) + "\n"))
        i += 1
    return out


def prose(text):
    """The text outside fenced blocks."""
    keep, inside = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            inside = not inside
            continue
        keep.append("" if inside else line)
    return "\n".join(keep)


def slug(heading):
    """GitHub's anchor of a heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = prose(f.read())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def runnable(info):
    return len(info) >= 2 and info[0] in ("sh", "bash") and info[1] == "runnable"


def lint(src):
    bad = []
    for page in pages(src):
        path = os.path.join(src, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        n = text.count("\n")
        limit = README_MAX_LINES if page == "README.md" else PAGE_MAX_LINES
        if n > limit:
            bad.append(f"{page}: {n} lines, over its limit of {limit}")
        body = prose(text)
        for m in re.finditer(r"\]\(([^)\s]+)\)", body):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            line = body.count("\n", 0, m.start()) + 1
            if not os.path.exists(dest):
                bad.append(f"{page}:{line}: link to {target}: no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                bad.append(f"{page}:{line}: link to {target}: no heading with that anchor in {file_part or page}")
        for m in re.finditer(r"(?<![\w./-])((?:bench|scripts|configs|tests|src|fuzz)/[\w./-]*[\w/])", text):
            name = m.group(1)
            if "X" in name.split("/")[-1] or text[m.end():m.end() + 1] in ("*", "{", "<"):
                continue  # a placeholder or a pattern (scripts/make_*_golden.py)
            if not os.path.exists(os.path.join(src, name)):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{page}:{line}: names {name}, which does not exist")
        runs = [b for b in blocks(text) if runnable(b[1])]
        is_guide = page == "README.md" or (page.startswith("docs/guides/") and page not in GENERATED)
        if is_guide and not runs:
            bad.append(f"{page}: no runnable block (```sh runnable); each guide's commands are tested")
        for start, info, _ in blocks(text):
            if info and info[0] in ("sh", "bash") and len(info) > 1 and not runnable(info):
                bad.append(f"{page}:{start}: unknown block mark {' '.join(info)!r} (```sh runnable [fails])")
            if runnable(info) and info[2:] not in ([], ["fails"]):
                bad.append(f"{page}:{start}: unknown block mark {' '.join(info)!r} (```sh runnable [fails])")
    for b in bad:
        print("doc lint:", b)
    if not bad:
        print(f"doc lint: {len(pages(src))} pages within their sizes, every link and named path resolves")
    return 1 if bad else 0


def prepare_corpus(src, build, shared):
    """The fortunes corpus tokenized as the quickstart does, once (the repository's own when present)."""
    own = os.path.join(src, "data", "fortunes_text_document")
    if os.path.exists(own + ".idx"):
        return own
    prefix = os.path.join(shared, "fortunes")
    corpus = subprocess.run(["bash", os.path.join(src, "scripts", "prepare_corpus.sh")], check=True,
                            capture_output=True, text=True).stdout.split()
    subprocess.run([os.path.join(build, "meshflow"), "preprocess", "--input", *corpus, "--output-prefix", prefix,
                    "--vocab-file", os.path.join(src, "data/gpt2/encoder.json"), "--merges-file",
                    os.path.join(src, "data/gpt2/vocab.bpe"), "--shuffle-seed", "1"], check=True,
                   stdout=subprocess.DEVNULL)
    return prefix + "_text_document"


def scratch_for(root, page, src, build, fortunes):
    d = os.path.join(root, page.replace("/", "_").removesuffix(".md"))
    os.makedirs(os.path.join(d, "data"))
    for name in ("configs", "scripts", "bench", "tests"):
        os.symlink(os.path.join(src, name), os.path.join(d, name))
    os.symlink(build, os.path.join(d, "build"))
    for name in os.listdir(os.path.join(src, "data")):
        if not name.startswith("fortunes_text_document"):
            os.symlink(os.path.join(src, "data", name), os.path.join(d, "data", name))
    for ext in (".bin", ".idx"):
        os.symlink(fortunes + ext, os.path.join(d, "data", "fortunes_text_document" + ext))
    return d


def run_block(code, cwd, env, expect_failure):
    script = "set -euo pipefail\n" + code
    start = time.monotonic()
    p = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=BLOCK_TIMEOUT_S)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        timed_out = True
    try:  # whatever the block left running (a server it did not stop)
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    seconds = time.monotonic() - start
    if timed_out:
        return False, out, err, f"timed out after {BLOCK_TIMEOUT_S} s"
    if expect_failure:
        lines = [l for l in err.split("\n") if l.strip()]
        if p.returncode == 0:
            return False, out, err, "exited 0 where the page says it fails"
        if len(lines) != 1:
            return False, out, err, f"exited {p.returncode} with {len(lines)} lines on stderr, not one"
        return True, out, err, f"failed as the page says ({seconds:.1f} s)"
    if p.returncode != 0:
        return False, out, err, f"exited {p.returncode}"
    return True, out, err, f"ok ({seconds:.1f} s)"


def run(src, build, chosen):
    src, build = os.path.abspath(src), os.path.abspath(build)
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMP_NUM_THREADS": "1"})  # other tests share the cores
    root = tempfile.mkdtemp(prefix="meshflow-doc-")
    failed, count = [], 0
    try:
        fortunes = prepare_corpus(src, build, root)
        for page in chosen or pages(src):
            with open(os.path.join(src, page), encoding="utf-8") as f:
                todo = [b for b in blocks(f.read()) if runnable(b[1])]
            if not todo:
                continue
            cwd = scratch_for(root, page, src, build, fortunes)
            for start, info, code in todo:
                count += 1
                ok, out, err, what = run_block(code, cwd, env, "fails" in info)
                print(f"#### {page}:{start}: {what}\n{code}--- stdout\n{out[-4000:]}--- stderr\n{err[-4000:]}", flush=True)
                if not ok:
                    failed.append(f"{page}:{start} ({what})")
                    break  # the page's later blocks build on this one
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if failed:
        print("doc test: failed blocks:\n  " + "\n  ".join(failed))
        return 1
    print(f"doc test: {count} runnable blocks ran as their pages say")
    return 0


def main(argv):
    if len(argv) >= 2 and argv[0] == "lint":
        return lint(argv[1])
    if len(argv) >= 3 and argv[0] == "run":
        return run(argv[1], argv[2], argv[3:])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
