"""Headless Chromium for tools/players, driven by selenium with Debian's chromedriver: a `<video>` element plays
the proxy URL at 4x until `ended` (or from SEEK_TO after a seek); duration and end position are compared with
ffprobe's duration of the local file. A fresh browser per play, so its own cache never answers for the proxy."""

import re
import shutil

from players import SEEK_TO, Unsupported

MIME = {"mp4": "video/mp4", "webm": "video/webm", "hls-ts": "application/vnd.apple.mpegurl",
        "hls-fmp4": "application/vnd.apple.mpegurl", "dash": "application/dash+xml"}

PLAY = """
const [src, seek, mime, done] = arguments;
const v = document.createElement('video');
const log = [];
let finished = false;
const finish = (r) => { if (!finished) { finished = true; r.log = log; done(r); } };
v.muted = true;
v.preload = 'auto';
document.body.appendChild(v);
if (v.canPlayType(mime) === '') { finish({unsupported: 'canPlayType(' + mime + ') is empty'}); return; }
v.onerror = () => finish({error: v.error ? v.error.code + ' ' + v.error.message : 'error'});
v.onloadedmetadata = () => {
  log.push('metadata duration=' + v.duration);
  if (seek > 0) v.currentTime = seek;
  v.playbackRate = 4;
  v.play().catch((e) => finish({error: 'play(): ' + e}));
};
v.onseeked = () => log.push('seeked at ' + v.currentTime);
v.onended = () => finish({duration: v.duration, end: v.currentTime});
setTimeout(() => finish({error: 'no ended event within 45 s', duration: v.duration, end: v.currentTime}), 45000);
v.src = src;
"""


def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise Unsupported(f"selenium is not installed ({error}); tools/players installs it into a venv")
    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not binary or not driver:
        raise Unsupported("chromium or chromedriver is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--mute-audio",
                "--autoplay-policy=no-user-gesture-required", "--disk-cache-size=1", "--incognito"]:
        options.add_argument(arg)
    session = webdriver.Chrome(service=Service(driver), options=options)
    session.set_script_timeout(60)
    return session


def chromium(url, local, fmt, seek, ctx):
    want = ctx.reference(("duration", fmt), lambda: ctx.duration(fmt))
    session = browser()
    try:
        # A page on 127.0.0.1 (the origin's index.html): from about:blank, Chromium refuses media from a local
        # address before sending any request (MEDIA_ELEMENT_ERROR 4, seen with Chromium 156).
        session.get(ctx.page)
        result = session.execute_async_script(PLAY, url, SEEK_TO if seek else 0, MIME[fmt])
    finally:
        session.quit()
    log = "; ".join(result.get("log", []))
    if "unsupported" in result:
        raise Unsupported(result["unsupported"])
    if "error" in result:
        return False, f"{result['error']} ({log})"
    duration, end = result["duration"], result["end"]
    if abs(duration - want) > 0.5:
        return False, f"duration {duration:.2f} s vs {want:.2f} s local ({log})"
    if abs(end - duration) > 0.5:
        return False, f"ended at {end:.2f} s of {duration:.2f} s ({log})"
    landed = [float(m) for m in re.findall(r"seeked at ([0-9.]+)", log)]
    if seek and not any(abs(t - SEEK_TO) < 0.5 for t in landed):
        return False, f"the seek did not land at {SEEK_TO} s ({log})"
    return True, f"duration {duration:.2f} s, played to {end:.2f} s" + (f"; {log}" if seek else "")
