"""The processes around a player: nginx as the origin (with an access log the suite measures), `mediacache
proxy` on a fresh cache, and a logging relay between the player and the proxy that records what the player
asked for (its request targets and Range headers) and what the proxy answered (status, length)."""

import asyncio
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin:
    """A foreground nginx with one worker serving `root` on 127.0.0.1; one access-log line per request."""

    LOG_LINE = re.compile(r'^"(\S+) (\S+) [^"]*" (\d+) (\d+) "([^"]*)"$')

    def __init__(self, root, work):
        self.root = root
        self.port = free_port()
        self.page_port = free_port()  # the browser's page, on its own server so its requests are not logged
        self.dir = os.path.join(work, "nginx")
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "access.log")
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""daemon off;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 256; }}
http {{
  types {{ video/mp4 mp4 m4s; video/webm webm; application/vnd.apple.mpegurl m3u8;
           video/mp2t ts; application/dash+xml mpd; }}
  log_format media '"$request" $status $body_bytes_sent "$http_range"';
  access_log {self.log} media;
  client_body_temp_path {self.dir}/body; proxy_temp_path {self.dir}/proxy;
  fastcgi_temp_path {self.dir}/fastcgi; uwsgi_temp_path {self.dir}/uwsgi; scgi_temp_path {self.dir}/scgi;
  server {{ listen 127.0.0.1:{self.port}; root {root}; }}
  server {{ listen 127.0.0.1:{self.page_port}; root {root}; access_log off; }}
}}
""")
        self.process = subprocess.Popen([NGINX, "-c", conf, "-p", self.dir], stdin=subprocess.DEVNULL)
        wait_for_port(self.port, self.process, "nginx")
        open(self.log, "a").close()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}/{path}"

    def log_offset(self):
        return os.path.getsize(self.log)

    def entries_since(self, offset):
        """[(method, path, status, bytes sent, Range header)] logged after `offset`. nginx writes a line when
        the response has ended, so callers wait for the proxy to finish first (`settle`)."""
        with open(self.log) as f:
            f.seek(offset)
            lines = f.read().splitlines()
        out = []
        for line in lines:
            m = self.LOG_LINE.match(line)
            if m:
                method, target, status, sent, rng = m.groups()
                out.append((method, urllib.parse.urlsplit(target).path.lstrip("/"), int(status), int(sent),
                            "" if rng == "-" else rng))
        return out

    def settle(self, quiet=0.7, limit=15):
        """Waits until the access log has not grown for `quiet` seconds: the proxy's flights have ended."""
        last, since, start = -1, time.time(), time.time()
        while time.time() - start < limit:
            size = self.log_offset()
            if size != last:
                last, since = size, time.time()
            elif time.time() - since >= quiet:
                return
            time.sleep(0.1)

    def stop(self):
        self.process.terminate()
        self.process.wait()


def wait_for_port(port, process, name, timeout=20):
    start = time.time()
    while time.time() - start < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {port} within {timeout} s")


class Proxy:
    """`mediacache proxy` on a fresh cache directory, on a port it picks (read from its first line)."""

    def __init__(self, binary, cache_dir):
        self.cache_dir = cache_dir
        self.process = subprocess.Popen([binary, "proxy", "--cache", cache_dir, "--port", "0"],
                                        stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = self.process.stdout.readline().strip()
        m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if not m:
            self.process.kill()
            raise RuntimeError(f"mediacache proxy: unexpected first line {line!r}")
        self.port = int(m.group(1))

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class Relay:
    """A TCP relay in front of the proxy that passes bytes through untouched and records each request head
    (method, target, Range) and the matching response (status, Content-Length / Content-Range)."""

    def __init__(self):
        self.port = free_port()
        self.upstream = None
        self.requests = []  # dicts, appended in order of arrival
        self.lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait()

    def _serve(self, ready):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._client, "127.0.0.1", self.port))
        ready.set()
        self.loop.run_forever()
        server.close()

    def take(self):
        """The requests recorded since the last call."""
        with self.lock:
            out, self.requests = self.requests, []
        return out

    async def _client(self, creader, cwriter):
        if self.upstream is None:
            cwriter.close()
            return
        try:
            preader, pwriter = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            cwriter.close()
            return
        pending = []  # this connection's requests still waiting for their response head
        requests, responses = self._requests_of(pending), self._responses_of(pending)
        next(requests)
        next(responses)
        up = asyncio.ensure_future(self._pump(creader, pwriter, requests))
        down = asyncio.ensure_future(self._pump(preader, cwriter, responses))
        await asyncio.wait([up, down], return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(0.05)
        for t in (up, down):
            t.cancel()
        for w in (pwriter, cwriter):
            w.close()

    async def _pump(self, reader, writer, observer):
        while True:
            data = await reader.read(65536)
            if not data:
                return
            try:
                observer.send(data)
            except Exception:  # noqa: BLE001 - the parser gave up on this stream; bytes still pass
                observer = ignore()
                next(observer)
            writer.write(data)
            await writer.drain()

    def _requests_of(self, pending):
        """A generator fed the client's bytes; records each request head (GET/HEAD have no body)."""
        buf = b""
        while True:
            buf += yield
            while b"\r\n\r\n" in buf:
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                headers = parse_headers(lines[1:])
                entry = {"method": parts[0], "target": parts[1] if len(parts) > 1 else "",
                         "range": headers.get("range", ""), "agent": headers.get("user-agent", "")}
                with self.lock:
                    self.requests.append(entry)
                pending.append(entry)
                skip = int(headers.get("content-length", "0") or 0)
                while len(buf) < skip:
                    buf += yield
                buf = buf[skip:]

    def _responses_of(self, pending):
        """A generator fed the proxy's bytes; matches each response head with the oldest pending request and
        skips its body (Content-Length or chunked) to find the next head."""
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                buf += yield
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            headers = parse_headers(lines[1:])
            status = int(lines[0].split(" ")[1])
            entry = pending.pop(0) if pending else {}
            entry["status"] = status
            entry["content_range"] = headers.get("content-range", "")
            if status == 100:
                pending.insert(0, entry)
                continue
            if entry.get("method") == "HEAD" or status in (204, 304):
                continue
            if "chunked" in headers.get("transfer-encoding", "").lower():
                while True:
                    while b"\r\n" not in buf:
                        buf += yield
                    size_line, buf = buf.split(b"\r\n", 1)
                    size = int(size_line.split(b";")[0], 16)
                    while len(buf) < size + 2:
                        buf += yield
                    buf = buf[size + 2:]
                    if size == 0:
                        break
                entry["complete"] = True
            elif "content-length" in headers:
                skip = int(headers["content-length"])
                while len(buf) < skip:
                    buf += yield
                buf = buf[skip:]
                entry["complete"] = True
            else:
                return  # body until close: nothing follows

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)


def ignore():
    """An observer that takes bytes and does nothing (after a parser has given up)."""
    while True:
        yield


def parse_headers(lines):
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return headers
