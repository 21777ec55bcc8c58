"""The real-player suite (run by tools/players, which builds the proxy and sets up the venv; see its header)."""

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
import urllib.parse
import urllib.request

import accounting
import media
import players
from servers import Origin, Proxy, Relay

ALL_FORMATS = ["mp4", "hls-ts", "hls-fmp4", "dash", "webm"]
QUICK_FORMATS = ["mp4", "hls-ts", "dash"]
ALL_PLAYERS = ["ffmpeg", "gstreamer", "mpv", "vlc", "chromium"]
# What each player is asked to play; a pair left out is printed as UNSUPPORTED with this reason.
NOT_PLAYED = {("chromium", "dash"): "Chromium has no native DASH (needs dash.js/MSE, not available offline)"}


class Context:
    """Local reference results, computed once per (player, format, mode)."""

    def __init__(self, root, paths):
        self.root, self.paths, self.cache = root, paths, {}

    def reference(self, key, compute):
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    def duration(self, fmt):
        return media.media_duration(os.path.join(self.root, self.paths[fmt]))


def runner(name):
    if name == "chromium":
        import chromium
        return chromium.chromium
    return getattr(players, name)


def proxied(form, relay_port, origin_url):
    if form == "path":
        parts = urllib.parse.urlsplit(origin_url)
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
        return f"http://127.0.0.1:{relay_port}/{parts.scheme}/{parts.netloc}{rest}"
    name = origin_url.rsplit("/", 1)[-1]
    return f"http://127.0.0.1:{relay_port}/{name}?url={urllib.parse.quote(origin_url, safe='')}"


def detect_form(binary, work, origin):
    """`path` if this proxy serves `/http/HOST:PORT/PATH` (a throwaway proxy and cache), else `query`."""
    proxy = Proxy(binary, os.path.join(work, "detect-cache"))
    try:
        parts = urllib.parse.urlsplit(origin.url("movie.mp4"))
        request = urllib.request.Request(f"http://127.0.0.1:{proxy.port}/http/{parts.netloc}{parts.path}",
                                         headers={"Range": "bytes=0-0"})
        try:
            with urllib.request.urlopen(request, timeout=20) as response:
                return "path" if response.status in (200, 206) else "query"
        except OSError:
            return "query"
    finally:
        proxy.stop()
        shutil.rmtree(os.path.join(work, "detect-cache"), ignore_errors=True)


def play_once(name, fmt, seek, url, local, ctx, origin, relay):
    """Runs one play and returns (verdict, player detail, origin entries, relay requests)."""
    relay.take()
    offset = origin.log_offset()
    try:
        ok, detail = runner(name)(url, local, fmt, seek, ctx)
        verdict = "PASS" if ok else "FAIL"
    except players.Unsupported as why:
        verdict, detail = "UNSUPPORTED", str(why)
    except Exception as error:  # a crash of the harness for this cell must not stop the others
        verdict, detail = "FAIL", f"harness error: {error!r} {traceback.format_exc(limit=2)[-300:]}"
    origin.settle()
    return verdict, detail, origin.entries_since(offset), relay.take()


def run_cells(args, binary, work, origin, relay, ctx, form, results):
    cache_n = 0
    for name in args.players:
        for fmt in args.formats:
            key = (name, fmt)
            if key in NOT_PLAYED:
                for mode in ("cold", "warm", "seek"):
                    results.append((name, fmt, mode, "UNSUPPORTED", "", NOT_PLAYED[key]))
                continue
            local = os.path.join(ctx.root, ctx.paths[fmt])
            url = proxied(form, relay.port, origin.url(ctx.paths[fmt]))
            unsupported = None  # once a play says so, the format's other modes say so too
            for modes in (("cold", "warm"), ("seek",)):
                if unsupported:
                    results.extend((name, fmt, m, "UNSUPPORTED", "", unsupported) for m in modes)
                    continue
                cache_n += 1
                proxy = Proxy(binary, os.path.join(work, f"cache-{cache_n}"))
                relay.upstream = proxy.port
                try:
                    for mode in modes:
                        if unsupported:
                            results.append((name, fmt, mode, "UNSUPPORTED", "", unsupported))
                            continue
                        start = time.time()
                        verdict, detail, entries, requests = play_once(
                            name, fmt, mode == "seek", url, local, ctx, origin, relay)
                        if verdict == "UNSUPPORTED":
                            unsupported = detail
                            results.append((name, fmt, mode, verdict, "", detail))
                            print(f"  {name:9} {fmt:8} {mode:4} {verdict:11} {detail}", flush=True)
                            continue
                        checks = accounting.check(mode, entries, requests, ctx.root, form)
                        if verdict == "PASS" and checks.failures:
                            verdict = "FAIL"
                        notes = "; ".join(checks.failures + [detail] + checks.notes)
                        if verdict != "PASS":
                            # Whether the proxy sent every body whole says whose the failure is (a play that
                            # timed out in CI with every status 200 left that open).
                            unfinished = [r.get("target", "?")[:60] for r in requests
                                          if r.get("status") in (200, 206) and r.get("method") != "HEAD"
                                          and not r.get("complete")]
                            notes += (f"; bodies not received whole: {len(unfinished)}"
                                      + (f" ({', '.join(unfinished[:3])})" if unfinished else ""))
                        results.append((name, fmt, mode, verdict, checks.ratio_text, notes))
                        print(f"  {name:9} {fmt:8} {mode:4} {verdict:11} {checks.ratio_text:>6} "
                              f"{time.time() - start:5.1f}s  {notes}", flush=True)
                finally:
                    relay.upstream = None
                    proxy.stop()
                    shutil.rmtree(proxy.cache_dir, ignore_errors=True)


def print_matrix(results, args, form):
    print(f"\nReal-player matrix (proxy URL form: {form}; ratio = origin bytes / bytes the player's ranges "
          "needed, rounded out to 1 MiB chunks; warm must send nothing to the origin)\n")
    header = f"| {'player':9} | {'format':8} | {'cold':17} | {'warm':17} | {'seek':17} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    cells = {(r[0], r[1], r[2]): r for r in results}
    for name in args.players:
        for fmt in args.formats:
            row = []
            for mode in ("cold", "warm", "seek"):
                r = cells.get((name, fmt, mode))
                row.append("-" if r is None else (r[3] + (f" {r[4]}" if r[4] and r[3] != "UNSUPPORTED" else "")))
            print(f"| {name:9} | {fmt:8} | {row[0]:17} | {row[1]:17} | {row[2]:17} |")
    print()
    for r in results:
        if r[3] != "PASS":
            print(f"{r[3]:11} {r[0]} {r[1]} {r[2]}: {r[5]}")


def main():
    parser = argparse.ArgumentParser(prog="tools/players")
    parser.add_argument("--binary", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help="comma-separated players: " + ",".join(ALL_PLAYERS))
    parser.add_argument("--formats", help="comma-separated formats: " + ",".join(ALL_FORMATS))
    parser.add_argument("--form", choices=["auto", "path", "query"], default="auto")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    args.players = args.only.split(",") if args.only else ALL_PLAYERS
    args.formats = args.formats.split(",") if args.formats else (QUICK_FORMATS if args.quick else ALL_FORMATS)
    for p in args.players:
        if p not in ALL_PLAYERS:
            parser.error(f"--only: unknown player {p!r} (known: {', '.join(ALL_PLAYERS)})")
    for f in args.formats:
        if f not in ALL_FORMATS:
            parser.error(f"--formats: unknown format {f!r} (known: {', '.join(ALL_FORMATS)})")

    work = tempfile.mkdtemp(prefix="mediacache-players.")
    os.chmod(work, 0o755)  # VLC runs as nobody but reads only URLs; the local references need the media readable
    origin = relay = None
    results = []
    try:
        root = os.path.join(work, "media")
        print(f"# work directory {work}; making media ({', '.join(args.formats)})", flush=True)
        paths = media.make_media(root, set(args.formats))
        for dirpath, _, files in os.walk(work):
            os.chmod(dirpath, 0o755)
            for f in files:
                os.chmod(os.path.join(dirpath, f), 0o644)
        with open(os.path.join(root, "index.html"), "w") as f:
            f.write("<!doctype html><title>tools/players</title><body></body>\n")
        origin = Origin(root, work)
        form = detect_form(args.binary, work, origin) if args.form == "auto" else args.form
        print(f"# origin nginx on {origin.port}; proxy URL form: {form}", flush=True)
        relay = Relay()
        ctx = Context(root, paths)
        ctx.page = f"http://127.0.0.1:{origin.page_port}/index.html"
        run_cells(args, args.binary, work, origin, relay, ctx, form, results)
        print_matrix(results, args, form)
    finally:
        if relay:
            relay.stop()
        if origin:
            origin.stop()
        if args.keep:
            print(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in results if r[3] == "FAIL"]
    unsupported = [r for r in results if r[3] == "UNSUPPORTED"]
    print(f"\n{len(results) - len(failed) - len(unsupported)} passed, {len(failed)} failed, "
          f"{len(unsupported)} unsupported")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
