#!/usr/bin/env bash
# Regenerates Fixtures/media/ completely with ffmpeg from synthetic sources (testsrc2 video + a sine tone):
# two MP4 files (index at the tail / faststart) and a small HLS set (plain TS, AES-128 TS, fMP4 variants).
# With the same ffmpeg build the output is byte-for-byte the same on every run (single-threaded x264,
# bitexact muxing, a fixed key and IV).
#
#   tools/make-media-fixtures.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/Fixtures/media

for tool in ffmpeg ffprobe; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "make-media-fixtures: $tool not found (apt-get install ffmpeg)" >&2
    exit 1
  }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/mediacache-media.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The source: 4 s of 320x180 testsrc2 at 25 fps and a 440 Hz tone.
duration=4
video_codec=(-c:v libx264 -preset veryfast -profile:v main -pix_fmt yuv420p -threads 1)
audio_codec=(-c:a aac -b:a 64k -ac 1)
# (Not `ffmpeg ... | grep -q`: grep exiting early makes the pipeline fail under pipefail.)
encoders=$(ffmpeg -hide_banner -encoders 2>/dev/null)
for encoder in libx264 aac; do
  grep -q " $encoder " <<<"$encoders" || {
    echo "make-media-fixtures: this ffmpeg has no $encoder encoder (Debian's ffmpeg package has both)" >&2
    exit 1
  }
done
encode=(
  -hide_banner -v error -y
  -f lavfi -i "testsrc2=size=320x180:rate=25:duration=$duration"
  -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$duration"
  -map 0:v -map 1:a "${video_codec[@]}" "${audio_codec[@]}"
  # A key frame every second exactly, so HLS segments are 1 s long.
  -g 25 -keyint_min 25 -sc_threshold 0
  -map_metadata -1 -fflags +bitexact -flags:v +bitexact -flags:a +bitexact
)

# Prints "offset type" for every top-level atom (box) of an MP4 file.
top_level_atoms() {
  local file=$1 size offset=0 length type i
  local -a b
  size=$(stat -c %s "$file")
  while [ "$offset" -lt "$size" ]; do
    read -r -a b < <(od -An -v -tu1 -j "$offset" -N 16 "$file" | tr '\n' ' ')
    length=$(((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]))
    type=$(printf '%b' "$(printf '\\%03o' "${b[4]}" "${b[5]}" "${b[6]}" "${b[7]}")")
    if [ "$length" -eq 1 ]; then
      length=0
      for i in 8 9 10 11 12 13 14 15; do length=$(((length << 8) | b[i])); done
    elif [ "$length" -eq 0 ]; then
      length=$((size - offset))
    fi
    if [ "$length" -lt 8 ]; then
      echo "make-media-fixtures: bad atom at offset $offset in $file" >&2
      return 1
    fi
    echo "$offset $type"
    offset=$((offset + length))
  done
}

# The offset of the first top-level atom of `type` in `file` (fails when there is none).
atom_offset() {
  local offset
  offset=$(top_level_atoms "$1" | awk -v type="$2" '$2 == type && !found { print $1; found = 1 }')
  [ -n "$offset" ] || {
    echo "make-media-fixtures: no '$2' atom in $1" >&2
    return 1
  }
  echo "$offset"
}

# MP4: the muxer's default writes moov after mdat; +faststart moves it to the front.
ffmpeg "${encode[@]}" -b:v 250k -maxrate 300k -bufsize 300k "$work/tail-index.mp4"
ffmpeg -hide_banner -v error -y -i "$work/tail-index.mp4" -map 0 -c copy -map_metadata -1 \
  -fflags +bitexact -movflags +faststart "$work/faststart.mp4"
moov=$(atom_offset "$work/tail-index.mp4" moov)
mdat=$(atom_offset "$work/tail-index.mp4" mdat)
[ "$moov" -gt "$mdat" ] || {
  echo "make-media-fixtures: tail-index.mp4 has moov at $moov before mdat at $mdat" >&2
  exit 1
}
moov=$(atom_offset "$work/faststart.mp4" moov)
mdat=$(atom_offset "$work/faststart.mp4" mdat)
[ "$moov" -lt "$mdat" ] || {
  echo "make-media-fixtures: faststart.mp4 has moov at $moov after mdat at $mdat" >&2
  exit 1
}

# HLS: three VOD variants with 1 s segments. ffmpeg writes a one-line master playlist beside each variant
# (for its RESOLUTION and CODECS); the real master combines them, with BANDWIDTH measured from the segments.
hls=$work/hls
mkdir -p "$hls/v0" "$hls/v1" "$hls/v2"
segmenting=(
  -f hls -hls_time 1 -hls_playlist_type vod -hls_flags independent_segments -master_pl_name master.m3u8
)

ffmpeg "${encode[@]}" -b:v 300k -maxrate 360k -bufsize 360k "${segmenting[@]}" \
  -hls_segment_filename "$hls/v0/seg%03d.ts" "$hls/v0/index.m3u8"

# A fixed AES-128 key and IV; the playlist names the key by the relative URI "key.bin".
printf '\x6d\x65\x64\x69\x61\x63\x61\x63\x68\x65\x2d\x74\x65\x73\x74\x21' >"$hls/v1/key.bin"
printf 'key.bin\n%s\n%s\n' "$hls/v1/key.bin" 0f0e0d0c0b0a09080706050403020100 >"$work/key-info"
ffmpeg "${encode[@]}" -s 256x144 -b:v 150k -maxrate 180k -bufsize 180k "${segmenting[@]}" \
  -hls_key_info_file "$work/key-info" -hls_segment_filename "$hls/v1/seg%03d.ts" "$hls/v1/index.m3u8"

ffmpeg "${encode[@]}" -s 192x108 -b:v 100k -maxrate 120k -bufsize 120k "${segmenting[@]}" \
  -hls_segment_type fmp4 -hls_fmp4_init_filename init.mp4 \
  -hls_segment_filename "$hls/v2/seg%03d.m4s" "$hls/v2/index.m3u8"

# `BANDWIDTH=<peak>,AVERAGE-BANDWIDTH=<average>` in bits per second of the segments of a media playlist.
measured_bandwidth() {
  local dir=$1 line duration=""
  while IFS= read -r line; do
    case $line in
      '#EXTINF:'*) duration=${line#\#EXTINF:} duration=${duration%%,*} ;;
      '#'* | '') ;;
      *) echo "$duration $(stat -c %s "$dir/$line")" ;;
    esac
  done <"$dir/index.m3u8" | awk '
    {
      rate = $2 * 8 / $1
      rate = (rate == int(rate)) ? rate : int(rate) + 1
      if (rate > peak) peak = rate
      bits += $2 * 8
      seconds += $1
    }
    END { printf "BANDWIDTH=%d,AVERAGE-BANDWIDTH=%d\n", peak, bits / seconds + 0.5 }'
}

{
  echo '#EXTM3U'
  echo '#EXT-X-VERSION:3'
  echo '#EXT-X-INDEPENDENT-SEGMENTS'
  for variant in v0 v1 v2; do
    attributes=$(grep '^#EXT-X-STREAM-INF:' "$hls/$variant/master.m3u8" | sed -e 's/^#EXT-X-STREAM-INF://' \
      -e 's/\(^\|,\)BANDWIDTH=[0-9]*//' -e 's/\(^\|,\)AVERAGE-BANDWIDTH=[0-9]*//' -e 's/^,//')
    echo "#EXT-X-STREAM-INF:$(measured_bandwidth "$hls/$variant"),$attributes"
    echo "$variant/index.m3u8"
  done
} >"$hls/master.m3u8"
rm "$hls/v0/master.m3u8" "$hls/v1/master.m3u8" "$hls/v2/master.m3u8"

# Every URI in the playlists is relative; the master and each variant read back locally.
if grep -Eq '(^|URI=")(/|[a-zA-Z][a-zA-Z0-9+.-]*:)' "$hls"/master.m3u8 "$hls"/v*/index.m3u8; then
  echo "make-media-fixtures: a playlist has an absolute URI" >&2
  exit 1
fi
require_line() {
  grep -q "$1" "$2" || {
    echo "make-media-fixtures: no line matching '$1' in $2" >&2
    exit 1
  }
}
require_line '^#EXT-X-KEY:METHOD=AES-128,URI="key.bin"' "$hls/v1/index.m3u8"
require_line '^#EXT-X-MAP:URI="init.mp4"' "$hls/v2/index.m3u8"
for variant in v0 v1 v2; do
  require_line '^#EXT-X-PLAYLIST-TYPE:VOD' "$hls/$variant/index.m3u8"
  require_line '^#EXT-X-ENDLIST' "$hls/$variant/index.m3u8"
done
# (ffmpeg refuses the local key file "key.bin" without -allowed_extensions ALL; over HTTP it does not.)
ffprobe -v error -allowed_extensions ALL -show_entries format=duration -of csv=p=0 "$hls/master.m3u8" \
  >/dev/null
for variant in v0 v1 v2; do
  frames=$(ffmpeg -v error -allowed_extensions ALL -i "$hls/$variant/index.m3u8" -f framemd5 - |
    grep -c '^0,')
  [ "$frames" -eq $((duration * 25)) ] || {
    echo "make-media-fixtures: $variant decodes to $frames video frames, expected $((duration * 25))" >&2
    exit 1
  }
done

# DASH: ffmpeg's dash muxer (SegmentTemplate with a SegmentTimeline, $RepresentationID$ and $Number%05d$), 1 s
# segments: two video representations of different bandwidth in one adaptation set, the audio in another.
dash=$work/dash
mkdir -p "$dash"
(
  cd "$dash"
  ffmpeg -hide_banner -v error -y \
    -f lavfi -i "testsrc2=size=320x180:rate=25:duration=$duration" \
    -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=$duration" \
    -map 0:v -map 0:v -map 1:a "${video_codec[@]}" "${audio_codec[@]}" \
    -g 25 -keyint_min 25 -sc_threshold 0 \
    -map_metadata -1 -fflags +bitexact -flags:v +bitexact -flags:a +bitexact \
    -b:v:0 300k -maxrate:v:0 360k -bufsize:v:0 360k \
    -s:v:1 192x108 -b:v:1 100k -maxrate:v:1 120k -bufsize:v:1 120k \
    -f dash -seg_duration 1 -use_template 1 -use_timeline 1 \
    -adaptation_sets "id=0,streams=v id=1,streams=a" manifest.mpd
)
require_line 'type="static"' "$dash/manifest.mpd"
require_line '<SegmentTimeline>' "$dash/manifest.mpd"
require_line 'media="chunk-stream$RepresentationID$-$Number%05d$.m4s"' "$dash/manifest.mpd"
for stream in 0 1 2; do
  [ -s "$dash/init-stream$stream.m4s" ] && [ -s "$dash/chunk-stream$stream-00001.m4s" ] || {
    echo "make-media-fixtures: DASH representation $stream has no init or first segment" >&2
    exit 1
  }
done
frames=$(ffmpeg -v error -i "$dash/manifest.mpd" -map 0:v:0 -f framemd5 - | grep -c '^0,')
[ "$frames" -eq $((duration * 25)) ] || {
  echo "make-media-fixtures: the DASH video decodes to $frames frames, expected $((duration * 25))" >&2
  exit 1
}

cat >"$work/README.md" <<'EOF'
# Media fixtures

Small synthetic media (4 s of ffmpeg `testsrc2` video at 320x180, 25 fps, H.264, and a 440 Hz AAC tone)
for testing players reading through the origin and the proxy. Regenerate everything with
`tools/make-media-fixtures.sh` (needs ffmpeg; same bytes on every run with the same ffmpeg build).

- `tail-index.mp4`: an ordinary MP4 whose `moov` index comes after `mdat` at the end of the file, so a player
  reading over HTTP has to seek to the tail before it can play (Range requests near the end of the file).
- `faststart.mp4`: the same streams remuxed with `-movflags +faststart` (`moov` first): plays from the start
  of the file with sequential reads.
- `hls/master.m3u8`: a master playlist with three variants of different `BANDWIDTH` (measured peak and
  average of the segments) and relative URIs: playlist rewriting and variant selection.
- `hls/v0/`: 320x180 VOD media playlist with 1 s MPEG-TS segments (`seg*.ts`): plain segmented playback.
- `hls/v1/`: 256x144 MPEG-TS segments encrypted with AES-128; `#EXT-X-KEY` names the committed key
  `key.bin` by a relative URI: key requests through the proxy (local ffmpeg needs `-allowed_extensions ALL`
  for the `.bin` key file; over HTTP it does not).
- `hls/v2/`: 192x108 fragmented MP4 segments (`seg*.m4s`) with an `#EXT-X-MAP` init segment `init.mp4`
  (ffmpeg 5.1 decodes nothing after `-ss` in this variant, locally too: its hls demuxer, not the files).

- `dash/manifest.mpd`: a static DASH MPD made by ffmpeg's dash muxer: SegmentTemplate with a SegmentTimeline,
  `$RepresentationID$` and `$Number%05d$`, 1 s fMP4 segments; adaptation set 0 holds video representations `0`
  (320x180, bandwidth 300000) and `1` (192x108, 100000), set 1 the audio representation `2`. Each has an
  `init-stream<id>.m4s` and `chunk-stream<id>-<number>.m4s` segments (audio has 5, the last a short tail).
  Tests/MediaCacheIntegrationTests/FetchDASHCommandTests.swift caches them with `mediacache fetch --dash`.

Tests/MediaCacheIntegrationTests/MediaFixtureTests.swift serves them with the test origin's `files` mode and
checks that ffprobe and ffmpeg read them over HTTP exactly as they read the local files.
EOF

rm -rf "$out"
mkdir -p "$(dirname "$out")"
mv "$work" "$out"
rm "$out/key-info"
trap - EXIT
chmod -R u=rwX,go=rX "$out"
echo "Fixtures/media: $(find "$out" -type f | wc -l) files, $(du -sk "$out" | cut -f1) KiB" >&2
