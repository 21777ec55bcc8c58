"""Test media for the real-player suite, made with ffmpeg from one synthetic source.

Every format is a copy (no re-encode) of the same H.264/AAC source, except the WebM, so the decoded frames of
each format can be compared with the same format read from the local file system.
"""

import os
import subprocess

# Noise makes the picture hard to compress, so 12 s come to ~6 MB: several 1 MiB chunks per object, which is
# what the origin-byte checks need to say anything.
SOURCE_FILTER = "testsrc2=size=640x360:rate=25,noise=alls=25:allf=t"
DURATION = 12


def run(args, **kwargs):
    subprocess.run(args, check=True, stdin=subprocess.DEVNULL, **kwargs)


def make_media(root, formats):
    """Writes the media under `root` (nginx's document root) and returns {format: path relative to root}."""
    os.makedirs(root, exist_ok=True)
    ff = ["ffmpeg", "-v", "error", "-y"]
    src = os.path.join(root, "movie.mp4")
    # The moov box at the END (no +faststart): a player must read the tail before it can play, the hard case.
    run(ff + ["-f", "lavfi", "-i", SOURCE_FILTER, "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
              "-t", str(DURATION), "-c:v", "libx264", "-preset", "veryfast", "-b:v", "4M", "-maxrate", "4.5M",
              "-bufsize", "4M", "-g", "50", "-keyint_min", "50", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
              "-c:a", "aac", "-b:a", "128k", src])
    with open(src, "rb") as f:
        head = f.read(64)
    if b"moov" in head:
        raise RuntimeError(f"{src}: moov is at the start; the suite wants it at the end")
    paths = {"mp4": "movie.mp4"}
    if "hls-ts" in formats:
        d = os.path.join(root, "hls-ts")
        os.makedirs(d, exist_ok=True)
        run(ff + ["-i", src, "-c", "copy", "-bsf:v", "h264_mp4toannexb", "-f", "hls", "-hls_time", "4",
                  "-hls_playlist_type", "vod", "-hls_segment_filename", os.path.join(d, "seg%d.ts"),
                  os.path.join(d, "index.m3u8")])
        paths["hls-ts"] = "hls-ts/index.m3u8"
    if "hls-fmp4" in formats:
        d = os.path.join(root, "hls-fmp4")
        os.makedirs(d, exist_ok=True)
        run(ff + ["-i", src, "-c", "copy", "-f", "hls", "-hls_time", "4", "-hls_playlist_type", "vod",
                  "-hls_segment_type", "fmp4", "-hls_fmp4_init_filename", "init.mp4",
                  "-hls_segment_filename", os.path.join(d, "seg%d.m4s"), os.path.join(d, "index.m3u8")])
        paths["hls-fmp4"] = "hls-fmp4/index.m3u8"
    if "dash" in formats:
        d = os.path.join(root, "dash")
        os.makedirs(d, exist_ok=True)
        # Relative segment URLs (ffmpeg's default): they resolve through the proxy only in its path form.
        run(ff + ["-i", src, "-map", "0:v", "-map", "0:a", "-c", "copy", "-f", "dash", "-seg_duration", "4",
                  "-use_template", "1", "-use_timeline", "1", os.path.join(d, "manifest.mpd")])
        paths["dash"] = "dash/manifest.mpd"
    if "webm" in formats:
        out = os.path.join(root, "movie.webm")
        run(ff + ["-i", src, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "8", "-b:v", "3M",
                  "-g", "50", "-c:a", "libvorbis", "-b:a", "128k", out])
        paths["webm"] = "movie.webm"
    return paths


def media_duration(path):
    """The container duration ffprobe reports for a local file or playlist, in seconds."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path],
                         check=True, capture_output=True, text=True, stdin=subprocess.DEVNULL).stdout.strip()
    return float(out)
