"""Origin-byte checks of one play, from nginx's access log (what the proxy fetched) and the relay's record
(what the player asked the proxy for).

Definitions (docs for the coordinator):
- needed bytes of an object = the union of the byte ranges the player asked the proxy for (a GET without Range
  asks for the whole object; `bytes=a-` runs to the end), clipped to the object's size.
- origin bytes of an object = the sum of nginx's $body_bytes_sent for it during the play.
- cold/seek: every object's origin bytes <= 1.1 x its needed bytes, and no byte of an object is sent by the
  origin twice during one play (a response's span is taken from its Range start and the bytes actually sent; the
  proxy asks in windows, so one chunk may come in several responses, but never the same byte twice).
  The ratio shown is origin bytes / needed bytes over all objects, then (in brackets) the same against the needed
  ranges rounded out to whole 1 MiB chunks (the cache's unit: the least a cache of whole chunks fetches).
- warm: the origin sees no request at all.
"""

import os
import re
import urllib.parse
from collections import Counter

CHUNK = 1 << 20
LIMIT = 1.1


class Checks:
    def __init__(self):
        self.failures, self.notes, self.ratio_text = [], [], ""


def origin_path(target, form):
    """The origin path (relative to nginx's root) a request target of the proxy names, or None."""
    parts = urllib.parse.urlsplit(target)
    if form == "path" or parts.path.startswith(("/http/", "/https/")):
        m = re.match(r"^/https?/[^/]+/(.*)$", parts.path)
        if m:
            return urllib.parse.unquote(m.group(1))
    url = urllib.parse.parse_qs(parts.query).get("url")
    if url:
        return urllib.parse.urlsplit(url[0]).path.lstrip("/")
    return None


def parse_range(header, size):
    """[(start, end_exclusive)] for a Range header on an object of `size` bytes; the whole object without one."""
    if not header:
        return [(0, size)]
    spans = []
    for part in header.split("=", 1)[-1].split(","):
        first, _, last = part.strip().partition("-")
        if first == "" and last:
            spans.append((max(0, size - int(last)), size))
        elif first:
            end = size if last == "" else min(size, int(last) + 1)
            spans.append((int(first), end))
    return spans


def union_length(spans):
    total, current = 0, None
    for start, end in sorted(spans):
        if current and start <= current[1]:
            current[1] = max(current[1], end)
        else:
            if current:
                total += current[1] - current[0]
            current = [start, end]
    if current:
        total += current[1] - current[0]
    return total


def check(mode, entries, requests, root, form):
    c = Checks()
    origin_bytes = Counter()
    sent_spans = {}
    for method, path, status, sent, rng in entries:
        origin_bytes[path] += sent
        if status in (200, 206) and sent > 0:
            start = parse_range(rng, 1 << 62)[0][0] if rng else 0
            sent_spans.setdefault(path, []).append((start, start + sent))
    statuses = Counter(r.get("status", "no response") for r in requests)
    bad = sorted({f"{r.get('status', 'no response')} {r['method']} {r['target'][:80]}" for r in requests
                  if not isinstance(r.get("status"), int) or r["status"] >= 400})
    c.notes.append(f"{len(requests)} player requests ({', '.join(f'{k}x{v}' for k, v in statuses.items())}), "
                   f"{len(entries)} origin requests")
    if bad:
        c.notes.append("error answers: " + ", ".join(bad[:4]) + (" ..." if len(bad) > 4 else ""))

    if mode == "warm":
        c.ratio_text = f"{sum(origin_bytes.values())}B"
        if entries:
            c.failures.append(f"warm play sent {len(entries)} requests to the origin "
                              f"({', '.join(sorted({e[1] for e in entries})[:4])})")
        return c

    needed_spans, chunk_spans = {}, {}
    for r in requests:
        if r["method"] != "GET":
            continue
        path = origin_path(r["target"], form)
        file = os.path.join(root, path) if path else None
        if not file or not os.path.isfile(file):
            continue
        size = os.path.getsize(file)
        for start, end in parse_range(r["range"], size):
            if start < end:
                needed_spans.setdefault(path, []).append((start, end))
                chunk_spans.setdefault(path, []).append((start // CHUNK * CHUNK, min(size, -(-end // CHUNK) * CHUNK)))
    needed = {path: union_length(spans) for path, spans in needed_spans.items()}
    in_chunks = {path: union_length(spans) for path, spans in chunk_spans.items()}
    total_origin, total_needed = sum(origin_bytes.values()), sum(needed.values())
    total_chunks = sum(in_chunks.values())
    if total_needed:
        c.ratio_text = f"{total_origin / total_needed:.2f} [{total_origin / total_chunks:.2f}]"
    else:
        c.ratio_text = "0" if not total_origin else "inf"
    for path, sent in sorted(origin_bytes.items()):
        want = needed.get(path, 0)
        if sent > LIMIT * want:
            c.failures.append(f"{path}: origin sent {sent} B for {want} B needed"
                              + (f" ({sent / want:.2f}x; {in_chunks.get(path, 0)} B in whole chunks)" if want else ""))
    # A byte the origin sent twice in one play: two of its responses for one object overlap (the proxy asks in
    # windows, several requests per chunk, but never for the same byte twice).
    twice = []
    for path, spans in sorted(sent_spans.items()):
        overlap = sum(end - start for start, end in spans) - union_length(spans)
        if overlap > 0:
            twice.append((path, overlap))
    if twice:
        c.failures.append("bytes fetched more than once: " + ", ".join(f"{p} {n} B" for p, n in twice[:6])
                          + (" ..." if len(twice) > 6 else ""))
    return c
