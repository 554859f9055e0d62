#!/usr/bin/env python3
"""Decode a PNG (8-bit greyscale, RGB or RGBA, not interlaced) with the standard
library only and print its size and how much of it is not page background:

    png_stats.py FILE.png [--crop X Y W H OUT.png]

Output: "WIDTH HEIGHT INK COLOURS", INK the fraction of pixels that differ from
the most common colour (the background) and COLOURS the number of distinct
colours in a sample. The report test uses it to tell a rendered page from a
blank one."""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or interlace or ctype not in (0, 2, 6):
        sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
    bpp = {0: 1, 2: 3, 6: 4}[ctype]
    raw = zlib.decompress(b"".join(idat))
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = decode(sys.argv[1])
    if len(sys.argv) > 2 and sys.argv[2] == "--crop":
        x, y, cw, ch = map(int, sys.argv[3:7])
        out = b"".join(b"\0" + rows[j][x * bpp:(x + cw) * bpp] for j in range(y, min(h, y + ch)))
        ct = {1: 0, 3: 2, 4: 6}[bpp]
        def chunk(k, b):
            return struct.pack(">I", len(b)) + k + b + struct.pack(">I", zlib.crc32(k + b) & 0xffffffff)
        ch = min(h, y + ch) - y
        png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", cw, ch, 8, ct, 0, 0, 0)) + \
            chunk(b"IDAT", zlib.compress(out)) + chunk(b"IEND", b"")
        open(sys.argv[7], "wb").write(png)
        return
    counts = {}
    step = max(1, (w * h) // 200000)
    k = 0
    for row in rows:
        for i in range(0, w * bpp, bpp):
            if k % step == 0:
                px = row[i:i + bpp]
                counts[px] = counts.get(px, 0) + 1
            k += 1
    total = sum(counts.values())
    bg = max(counts.values())
    print(w, h, f"{1 - bg / total:.4f}", len(counts))


if __name__ == "__main__":
    main()
