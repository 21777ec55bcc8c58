"""One function per player: play `url` (full, or from SEEK_TO) and compare with the same format played from the
local file. Each returns (ok, detail); `Unsupported` means the player cannot do this at all here."""

import os
import re
import subprocess
import threading
import time

SEEK_TO = 7  # seconds; a keyframe every 2 s, so ffmpeg/GStreamer's accurate seeks decode from 6 s
TIMEOUT = 45
HERE = os.path.dirname(os.path.abspath(__file__))


class Unsupported(Exception):
    """The player cannot play this format at all on this machine (shown as UNSUPPORTED, never as PASS)."""


def capture(args, timeout=TIMEOUT, **kwargs):
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                           **kwargs)
    except subprocess.TimeoutExpired as expired:
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return -1, text(expired.stdout), f"{text(expired.stderr)}\nERROR: timed out after {timeout} s"
    return p.returncode, p.stdout, p.stderr


def tail(text, n=3):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:])[-300:]


def compare_hashes(name, got, want):
    if not want:
        # The player fails on the file itself (ffmpeg 5.1 decodes nothing after -ss in fMP4 HLS): not the proxy.
        raise Unsupported(f"{name} decodes no frames from the local file itself here")
    if got == want:
        return True, f"{len(got)} frames identical"
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    return False, f"{len(got)} frames vs {len(want)} local; first difference at frame {first}"


# ---- ffmpeg: decoded video frame hashes (framemd5) ---------------------------------------------------------
def ffmpeg_hashes(source, fmt, seek):
    args = ["ffmpeg", "-nostdin", "-v", "error"]
    if fmt.startswith("hls"):
        args += ["-allowed_extensions", "ALL"]
    if seek:
        args += ["-ss", str(SEEK_TO)]
    args += ["-i", source, "-map", "0:v:0", "-f", "framemd5", "-"]
    code, out, err = capture(args)
    hashes = [line.split(",")[-1].strip() for line in out.splitlines() if line and not line.startswith("#")]
    return code, hashes, err


def ffmpeg(url, local, fmt, seek, ctx):
    want = ctx.reference(("ffmpeg", fmt, seek), lambda: ffmpeg_hashes(local, fmt, seek)[1])
    code, got, err = ffmpeg_hashes(url, fmt, seek)
    if code != 0:
        return False, f"exit {code}: {tail(err)}"
    return compare_hashes("ffmpeg", got, want)


# ---- GStreamer: playbin, decoded I420 frame checksums (checksumsink); seeks through the Python bindings ------
def gst_hashes(uri, seek):
    if seek:
        args = ["/usr/bin/python3", os.path.join(HERE, "gst_seek.py"), uri, str(SEEK_TO)]
    else:
        args = ["gst-launch-1.0", "-q", "playbin", f"uri={uri}",
                "video-sink=videoconvert ! video/x-raw,format=I420 ! checksumsink sync=false",
                "audio-sink=fakesink sync=false"]
    code, out, err = capture(args)
    hashes = [m.group(1) for m in re.finditer(r"^\S+ ([0-9a-f]{40})$", out, re.M)]
    failed = code != 0 or "ERROR" in err
    return failed, code, hashes, err


def gstreamer(url, local, fmt, seek, ctx):
    if seek and subprocess.run(["/usr/bin/python3", "-c", "import gi; gi.require_version('Gst', '1.0')"],
                               capture_output=True).returncode != 0:
        raise Unsupported("seeking needs GStreamer's Python bindings (gir1.2-gstreamer-1.0, python3-gi)")
    want = ctx.reference(("gst", fmt, seek), lambda: gst_hashes("file://" + local, seek)[2])
    failed, code, got, err = gst_hashes(url, seek)
    crashed = ""
    if code < -1:
        # Killed by a signal (-1 is our timeout): GStreamer 1.22's hlsdemux once died of SIGSEGV mid-seek in CI,
        # printing nothing. A crash says nothing about the bytes, so the play is made once more, and says so.
        crashed = f" (GStreamer died of signal {-code} once; played again)"
        failed, code, got, err = gst_hashes(url, seek)
    if failed:
        return False, f"exit {code}: {tail(err)}{crashed}"
    ok, message = compare_hashes("gstreamer", got, want)
    return ok, message + crashed


# ---- mpv: duration and first/last playback position from a Lua script --------------------------------------
def mpv_probe(source, seek):
    args = ["mpv", "--no-config", "--really-quiet", "--vo=null", "--ao=null", "--untimed", "--ao-null-untimed",
            f"--script={os.path.join(HERE, 'mpv_probe.lua')}", "--msg-level=all=error"]
    if seek:
        args.append(f"--start={SEEK_TO}")
    code, out, err = capture(args + [source])
    m = re.search(r"MCPROBE duration=(\S+) first=(\S+) last=(\S+) error=(.*)", out)
    if not m:
        return None, f"exit {code}, no probe line: {tail(out + err)}"
    values = [float(v) if v not in ("nil", "") else None for v in m.groups()[:3]]
    return values, m.group(4).strip() or (f"exit {code}" if code else "")


def mpv(url, local, fmt, seek, ctx):
    want, _ = ctx.reference(("mpv", fmt, seek), lambda: mpv_probe(local, seek))
    got, error = mpv_probe(url, seek)
    if got is None or want is None:
        return False, f"{error}" if got is None else "the local reference failed"
    if seek and want[1] is not None and (want[2] or 0) - want[1] < 1:
        # mpv (ffmpeg's HLS demuxer) stops right after a seek in fMP4 HLS even on the local file: not the proxy.
        raise Unsupported(f"mpv plays only {want[1]}-{want[2]} s after seeking in the local file itself")
    return positions_match("mpv", got, want, tolerance=0.3, error=error)


def positions_match(name, got, want, tolerance, error=""):
    labels = ["duration", "first position", "last position"]
    for label, g, w in zip(labels, got, want):
        if w is None:
            continue
        if g is None or abs(g - w) > tolerance:
            return False, f"{label} {g} vs {w} local {error}".strip()
    return True, "duration %.2f s, played %.2f-%.2f s as the local file" % tuple(x or 0 for x in got)


# ---- VLC 3: duration and positions from its rc interface, run as `nobody` (VLC refuses root) ---------------
def vlc_probe(source, seek, timeout=60):
    home = "/tmp/mediacache-players-vlc-home"
    os.makedirs(home, exist_ok=True)
    prefix = []
    if os.geteuid() == 0:
        try:
            os.chown(home, 65534, 65534)
        except OSError:
            pass
        prefix = ["runuser", "-u", "nobody", "--"]
    args = prefix + ["env", f"HOME={home}", "cvlc", "-I", "rc", "--rc-fake-tty", "--vout=dummy",
                     "--aout=dummy", "--rate=2", "--play-and-exit", "--no-video-title-show"]
    if seek:
        args.append(f"--start-time={SEEK_TO}")
    p = subprocess.Popen(args + [source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # rc answers each command with one line; ask for the length and the time, in pairs, every 0.1 s until exit.
    # (The length was asked once, at 0.5 s: a VLC slow to open the file, on a loaded machine, answered 0.)
    def feed():
        try:
            time.sleep(0.5)
            while p.poll() is None:
                p.stdin.write("get_length\nget_time\n")
                p.stdin.flush()
                time.sleep(0.1)
        except (BrokenPipeError, ValueError, OSError):
            pass
    # Not communicate(): it closes stdin, and rc quits VLC at the end of its input.
    out, err = [], []
    readers = [threading.Thread(target=lambda s=stream, b=buf: b.append(s.read()), daemon=True)
               for stream, buf in ((p.stdout, out), (p.stderr, err))]
    for t in readers + [threading.Thread(target=feed, daemon=True)]:
        t.start()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return None, f"timed out after {timeout} s"
    for t in readers:
        t.join(5)
    out, err = "".join(out), "".join(err)
    numbers = [int(m.group(1)) for m in re.finditer(r"^(?:> )*(\d+)\s*$", out, re.M)]
    if not numbers:
        return None, f"exit {p.returncode}, no answer from rc: {tail(err)}"
    pairs = list(zip(numbers[0::2], numbers[1::2])) or [(numbers[0], 0)]
    length, times = max(n for n, _ in pairs), [t for _, t in pairs if t > 0] or [0]
    return [float(length), float(times[0]), float(max(times))], tail(err, 2) if p.returncode else ""


def vlc(url, local, fmt, seek, ctx):
    want, _ = ctx.reference(("vlc", fmt, seek), lambda: vlc_probe(local, seek))
    got, error = vlc_probe(url, seek)
    if got is None:
        return False, error
    if want is None:
        return False, "the local reference failed"
    # rc reports whole seconds and is polled every 0.1 s at 2x: the duration within 1 s, played at least as far
    # as the local file (within 2 s), and after a seek the first position within 1.5 s of the local one.
    if abs(got[0] - want[0]) > 1:
        return False, f"duration {got[0]} s vs {want[0]} s local"
    if got[2] < want[2] - 2:
        return False, f"stopped at {got[2]} s; the local file played to {want[2]} s {error}".strip()
    if seek and abs(want[1] - SEEK_TO) > 1.5:
        # Seen with VLC 3.0.24 on HLS: --start-time lands elsewhere on the local playlist too: not the proxy.
        raise Unsupported(f"VLC's --start-time={SEEK_TO} starts the local file itself at {want[1]:.0f} s")
    if seek and abs(got[1] - want[1]) > 1.5:
        return False, f"first position after the seek {got[1]} s vs {want[1]} s local"
    return True, "duration %.0f s, played %.0f-%.0f s (local %.0f-%.0f s)" % (got[0], got[1], got[2], want[1],
                                                                             want[2])
