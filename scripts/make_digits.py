#!/usr/bin/env python3
"""Writes scikit-learn's 1797 handwritten digits (8x8, grey values 0..16) as PNG class folders.

Usage: make_digits.py DIGITS_CSV_GZ OUT_DIR

OUT_DIR/train/<digit>/<n>.png and OUT_DIR/valid/<digit>/<n>.png, n the image's row in the file
(four digits, so that name order is row order); every 5th image (n % 5 == 4) is held out:
1438 training and 359 validation images. Each PNG is the original 8 x 8 8-bit grey image, the
values scaled to 0..255 (v * 255 // 16); the pipeline resizes them (model.image_size). Only the
standard library: PNG chunks written with zlib and struct. The output is the same bytes on every
run.
"""
import csv
import gzip
import os
import struct
import sys
import zlib


def png_gray8(width, height, rows):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(r) for r in rows)  # filter type 0 per row
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit greyscale, no interlace
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) +
            chunk(b"IEND", b""))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    with gzip.open(src, "rt") as f:
        rows = [r for r in csv.reader(f) if r]
    if len(rows) != 1797:
        sys.exit(f"make_digits.py: {src} holds {len(rows)} rows, 1797 expected")
    counts = {"train": 0, "valid": 0}
    for n, r in enumerate(rows):
        values = [int(float(v)) for v in r[:64]]
        label = int(float(r[64]))
        split = "valid" if n % 5 == 4 else "train"
        pixels = [[values[y * 8 + x] * 255 // 16 for x in range(8)] for y in range(8)]
        folder = os.path.join(out, split, str(label))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{n:04d}.png"), "wb") as f:
            f.write(png_gray8(8, 8, pixels))
        counts[split] += 1
    print(f"{counts['train']} training and {counts['valid']} validation images, 10 classes")


if __name__ == "__main__":
    main()
