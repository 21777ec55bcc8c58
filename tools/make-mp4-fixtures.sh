#!/usr/bin/env bash
# Regenerates Fixtures/media/mp4/: tiny MP4 and QuickTime files (0.4 s of 32x32 video at 10 fps with
# B-frames, and an 8 kHz AAC tone) whose sample tables take every form MP4StartRanges reads, for its tests and
# as seeds of the mp4 fuzz target. ffmpeg writes the first five; the last three are tail.mp4 with a table or a
# header rewritten into a form ffmpeg does not write for so small a file (the bytes of the samples unchanged):
#
#   faststart.mp4   moov first (-movflags +faststart)
#   tail.mp4        moov after mdat, a `free` box before mdat
#   quicktime.mov   the QuickTime muxer (-f mov)
#   fragmented.mp4  empty moov with mvex, samples in moof/mdat pairs
#   audio-only.mp4  one track
#   co64.mp4        stco rewritten as co64 (64-bit chunk offsets)
#   stz2.mp4        stsz rewritten as stz2 with 16-bit sizes
#   largesize.mp4   `free` + mdat's 8-byte header rewritten as one 16-byte header with a 64-bit size
#
#   tools/make-mp4-fixtures.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/Fixtures/media/mp4
mkdir -p "$out"
command -v ffmpeg >/dev/null 2>&1 || { echo "make-mp4-fixtures: ffmpeg not found (apt-get install ffmpeg)" >&2; exit 1; }

source=(
  -hide_banner -v error -y
  -f lavfi -i "testsrc2=duration=0.4:size=32x32:rate=10"
  -f lavfi -i "sine=duration=0.4:sample_rate=8000"
  -c:v libx264 -threads 1 -g 2 -bf 1 -c:a aac -b:a 8k -fflags +bitexact -map_metadata -1
)
ffmpeg "${source[@]}" -movflags +faststart "$out/faststart.mp4"
ffmpeg "${source[@]}" "$out/tail.mp4"
ffmpeg -hide_banner -v error -y -i "$out/faststart.mp4" -c copy -f mov -fflags +bitexact "$out/quicktime.mov"
ffmpeg -hide_banner -v error -y -i "$out/faststart.mp4" -c copy -movflags frag_keyframe+empty_moov \
  -fflags +bitexact "$out/fragmented.mp4"
ffmpeg -hide_banner -v error -y -i "$out/faststart.mp4" -map 0:a -c copy -fflags +bitexact "$out/audio-only.mp4"

python3 - "$out" <<'PY'
import struct, sys
out = sys.argv[1]
CONTAINERS = {b"moov", b"trak", b"mdia", b"minf", b"stbl"}

def boxes(data):
    """(type, header bytes, payload bytes) of each box in data (32-bit sizes only: what ffmpeg wrote)."""
    result, offset = [], 0
    while offset + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[offset:offset + 8])
        result.append((kind, data[offset + 8:offset + size]))
        offset += size
    return result

def build(kind, payload):
    return struct.pack(">I4s", 8 + len(payload), kind) + payload

def rewrite(data, change):
    """data's boxes, descending into the containers down to stbl, each leaf box passed through change."""
    parts = []
    for kind, payload in boxes(data):
        if kind in CONTAINERS:
            parts.append(build(kind, rewrite(payload, change)))
        else:
            parts.append(change(kind, payload))
    return b"".join(parts)

def co64(kind, payload):
    if kind != b"stco":
        return build(kind, payload)
    count = struct.unpack(">I", payload[4:8])[0]
    offsets = struct.unpack(">%dI" % count, payload[8:8 + 4 * count])
    return build(b"co64", payload[:8] + struct.pack(">%dQ" % count, *offsets))

def stz2(kind, payload):
    if kind != b"stsz":
        return build(kind, payload)
    constant, count = struct.unpack(">II", payload[4:12])
    assert constant == 0
    sizes = struct.unpack(">%dI" % count, payload[12:12 + 4 * count])
    assert max(sizes) < 65536
    return build(b"stz2", payload[:4] + b"\0\0\0\x10" + struct.pack(">I", count) + struct.pack(">%dH" % count, *sizes))

tail = open(f"{out}/tail.mp4", "rb").read()
# moov is the last box: rewriting it moves no sample.
for name, change in (("co64", co64), ("stz2", stz2)):
    parts = []
    for kind, payload in boxes(tail):
        parts.append(build(kind, rewrite(payload, change)) if kind == b"moov" else build(kind, payload))
    open(f"{out}/{name}.mp4", "wb").write(b"".join(parts))

parts = []
items = boxes(tail)
for index, (kind, payload) in enumerate(items):
    if kind == b"free" and len(payload) == 0 and items[index + 1][0] == b"mdat":
        continue
    if kind == b"mdat":
        parts.append(struct.pack(">I4sQ", 1, b"mdat", 16 + len(payload)) + payload)
    else:
        parts.append(build(kind, payload))
open(f"{out}/largesize.mp4", "wb").write(b"".join(parts))
assert len(open(f"{out}/largesize.mp4", "rb").read()) == len(tail)
PY
ls -l "$out"
