"""Checks a `meshflow report` page as headless Chromium rendered it (tests/report_browser_test.sh).

Usage: report_page_check.py REPORT_DIR DOM_FILE SCREENSHOT CHROMIUM_LOG FIGURE_ID...

- DOM_FILE (chromium --dump-dom) holds the page's #figure-rects: each figure's plot area in page
  pixels, written by the page's inline script once the figures were laid out. Every FIGURE_ID must
  be there, with an <svg> and a plot area of non-zero size.
- In SCREENSHOT (the whole page at scale 1), each plot area must hold drawn data: coloured pixels
  (the axes, grid and text are grey, the series, bars and spans are coloured), at least
  MIN_INK_FRACTION of the area.
- CHROMIUM_LOG (chromium's stderr with --enable-logging=stderr) must hold no console message: the
  page logs nothing, so any is an error (an uncaught exception, a failed load, console.error).
- Every REPORT_DIR/*.svg must be well-formed XML and appear verbatim in index.html.

Prints one line per problem and exits 1 if there is any.
"""
import html
import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from PIL import Image

MIN_INK_FRACTION = 0.003  # of a plot area's pixels
MIN_INK_PIXELS = 40
SATURATION = 60  # max - min over R, G, B: a coloured pixel


def figure_rects(dom_text):
    m = re.search(r'<pre id="figure-rects"[^>]*>(.*?)</pre>', dom_text, re.S)
    if not m or not m.group(1).strip():
        return None
    return json.loads(html.unescape(m.group(1)))


def ink_fraction(img, r):
    x0, y0 = int(round(r["x"])) + 1, int(round(r["y"])) + 1
    x1, y1 = int(round(r["x"] + r["width"])) - 1, int(round(r["y"] + r["height"])) - 1
    if x1 <= x0 or y1 <= y0 or x1 > img.width or y1 > img.height:
        return None, 0
    crop = img.crop((x0, y0, x1, y1))
    ink = sum(1 for p in crop.getdata() if max(p) - min(p) >= SATURATION)
    return ink / ((x1 - x0) * (y1 - y0)), ink


def main():
    report_dir, dom_file, shot, log_file, *want = sys.argv[1:]
    problems = []
    rects = figure_rects(Path(dom_file).read_text(encoding="utf-8", errors="replace"))
    if rects is None:
        problems.append("the page's script wrote no figure rectangles (#figure-rects empty: did it run?)")
        rects = {"figures": []}
    by_id = {f["figure"]: f for f in rects["figures"]}
    img = Image.open(shot).convert("RGB")
    for fid in want:
        f = by_id.get(fid)
        if f is None:
            problems.append(f"figure {fid}: not on the page")
            continue
        if not f["svg"] or not f["plot_area"] or f["width"] < 10 or f["height"] < 10:
            problems.append(f"figure {fid}: no rendered <svg> plot area ({f})")
            continue
        frac, ink = ink_fraction(img, f)
        if frac is None:
            problems.append(f"figure {fid}: plot area {f} outside the screenshot {img.size}")
        elif frac < MIN_INK_FRACTION or ink < MIN_INK_PIXELS:
            problems.append(f"figure {fid}: plot area blank ({ink} coloured pixels, {100 * frac:.2f}% of it)")
        else:
            print(f"figure {fid}: {ink} coloured pixels ({100 * frac:.1f}% of its plot area)")
    console = [l for l in Path(log_file).read_text(errors="replace").splitlines() if ":CONSOLE" in l]
    for line in console:
        problems.append("console message: " + line.split("] ", 1)[-1])
    page = Path(report_dir, "index.html").read_text(encoding="utf-8")
    for svg in sorted(Path(report_dir).glob("*.svg")):
        text = svg.read_text(encoding="utf-8")
        try:
            ET.fromstring(text)
        except ET.ParseError as e:
            problems.append(f"{svg.name}: not well-formed XML: {e}")
        if text not in page:
            problems.append(f"{svg.name}: not inline in index.html")
    for p in problems:
        print("FAIL: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
