extension Dashboard {
  /// The page: no external script, style sheet, font or image. Everything shown is set with `textContent` (an
  /// object's content type comes from an origin: it is never parsed as HTML).
  static let page = #"""
    <!doctype html>
    <html lang="en">
    <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>MediaCache proxy</title>
    <style>
    body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
    h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
    #totals { display: flex; flex-wrap: wrap; gap: 0.6em; }
    .tile { border: 1px solid #ccc; border-radius: 6px; padding: 0.4em 0.8em; min-width: 9em; }
    .tile b { display: block; font-size: 1.3em; }
    table { border-collapse: collapse; } td, th { padding: 0.2em 0.6em; text-align: left; border-bottom: 1px solid #eee; }
    td.num { text-align: right; font-variant-numeric: tabular-nums; }
    .bar { position: relative; width: 320px; height: 12px; background: #e4e4e4; border-radius: 2px; }
    .bar span { position: absolute; top: 0; height: 12px; background: #2b7bd6; }
    .legend span { display: inline-block; width: 0.8em; height: 0.8em; margin: 0 0.3em 0 1em; }
    #status { color: #b00; }
    code { font-size: 0.9em; }
    </style>
    </head>
    <body>
    <h1>MediaCache proxy</h1>
    <p id="status"></p>
    <div id="totals"></div>
    <h2>Bytes served per 2 seconds, last 5 minutes</h2>
    <svg id="chart" width="600" height="120" role="img" aria-label="cache and origin bytes served"></svg>
    <p class="legend"><span style="background:#2b7bd6"></span>from the cache<span style="background:#e07b24"></span>from the origin</p>
    <h2>Fetching from the origin now</h2>
    <ul id="fetches"></ul>
    <h2>Objects, most recently used first</h2>
    <p id="paging"><button id="previous">previous</button> <span id="page"></span> <button id="next">next</button></p>
    <table>
    <thead><tr><th>object</th><th>type</th><th>length</th><th>cached</th><th>cached ranges</th><th>last use</th><th>pinned</th><th>group</th></tr></thead>
    <tbody id="objects"></tbody>
    </table>
    <script>
    "use strict";
    const limit = 50;
    const history = [];
    let offset = 0;
    let last = null;

    function human(bytes) {
      if (bytes === null || bytes === undefined) return "?";
      const units = ["B", "KiB", "MiB", "GiB", "TiB"];
      let value = bytes, unit = 0;
      while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
      return (unit === 0 ? value : value.toFixed(1)) + " " + units[unit];
    }

    function element(tag, text, className) {
      const node = document.createElement(tag);
      if (text !== undefined) node.textContent = text;
      if (className) node.className = className;
      return node;
    }

    function tile(label, value) {
      const node = element("div", undefined, "tile");
      node.appendChild(element("b", value));
      node.appendChild(document.createTextNode(label));
      return node;
    }

    function showTotals(t) {
      const box = document.getElementById("totals");
      box.replaceChildren(
        tile("objects", t.objects === null ? "?" : String(t.objects)),
        tile("on disk", human(t.bytesOnDisk)),
        tile("hit ratio (bytes)", (t.hitRatio * 100).toFixed(1) + " %"),
        tile("requests", String(t.requests)),
        tile("hits / misses", t.cacheHits + " / " + t.cacheMisses),
        tile("served from cache", human(t.servedFromCache)),
        tile("served from origin", human(t.servedFromOrigin)),
        tile("streaming now", String(t.activeResponses)),
        tile("players waiting for an origin", String(t.playersWaitingForOrigin)),
        tile("origin errors", String(t.originErrors)));
    }

    function showChart(snapshot) {
      const t = snapshot.totals;
      if (last !== null) {
        history.push({ cache: Math.max(0, t.servedFromCache - last.servedFromCache),
                       origin: Math.max(0, t.servedFromOrigin - last.servedFromOrigin) });
        if (history.length > 150) history.shift();
      }
      last = t;
      const svg = document.getElementById("chart");
      const ns = "http://www.w3.org/2000/svg";
      svg.replaceChildren();
      const peak = Math.max(1, ...history.map((p) => p.cache + p.origin));
      history.forEach((point, index) => {
        const x = 600 - (history.length - index) * 4;
        const cacheHeight = 110 * point.cache / peak, originHeight = 110 * point.origin / peak;
        for (const [height, y, color] of [[cacheHeight, 120 - cacheHeight, "#2b7bd6"],
                                          [originHeight, 120 - cacheHeight - originHeight, "#e07b24"]]) {
          const rect = document.createElementNS(ns, "rect");
          rect.setAttribute("x", x); rect.setAttribute("y", y);
          rect.setAttribute("width", 3); rect.setAttribute("height", height);
          rect.setAttribute("fill", color);
          svg.appendChild(rect);
        }
      });
    }

    function bar(object) {
      const node = element("div", undefined, "bar");
      // (JSON leaves out what is not known: `length` is then undefined.)
      const end = object.length != null ? object.length
        : object.ranges.reduce((most, range) => Math.max(most, range[1]), 0);
      node.dataset.ranges = String(object.ranges.length);
      node.title = object.ranges.map((range) => range[0] + "-" + (range[1] - 1)).join(", ") || "nothing cached";
      if (end > 0) {
        for (const [start, stop] of object.ranges) {
          const run = element("span");
          run.style.left = (100 * start / end) + "%";
          run.style.width = Math.max(0.3, 100 * (stop - start) / end) + "%";
          node.appendChild(run);
        }
      }
      return node;
    }

    function showObjects(page) {
      const body = document.getElementById("objects");
      body.replaceChildren(...page.items.map((object) => {
        const row = element("tr");
        row.dataset.object = object.id;
        const id = element("td"); id.appendChild(element("code", object.id.slice(0, 16))); id.title = object.id;
        const chunks = element("td"); chunks.appendChild(bar(object));
        row.append(id, element("td", object.contentType || "?"), element("td", human(object.length), "num"),
                   element("td", human(object.cachedBytes), "num"), chunks,
                   element("td", new Date(object.lastUse * 1000).toLocaleString()),
                   element("td", object.pinned ? "pinned" : ""), element("td", object.group || ""));
        return row;
      }));
      const shown = page.items.length;
      document.getElementById("page").textContent =
        shown === 0 ? "no objects" : (page.offset + 1) + "-" + (page.offset + shown) + " of " + page.total;
      document.getElementById("previous").disabled = page.offset === 0;
      document.getElementById("next").disabled = page.offset + shown >= page.total;
    }

    function showFetches(fetches) {
      const list = document.getElementById("fetches");
      list.replaceChildren(...fetches.map((fetch) => {
        const item = element("li");
        item.dataset.fetch = fetch.id;
        item.append(element("code", fetch.id.slice(0, 16)), " " + fetch.flights + " origin request" + (fetch.flights == 1 ? "" : "s"));
        return item;
      }));
      if (fetches.length == 0) list.append(element("li", "none"));
    }

    async function poll() {
      const status = document.getElementById("status");
      try {
        const response = await fetch("dashboard.json?offset=" + offset + "&limit=" + limit, { cache: "no-store" });
        if (!response.ok) throw new Error("HTTP " + response.status);
        const snapshot = await response.json();
        showTotals(snapshot.totals);
        showChart(snapshot);
        showFetches(snapshot.fetches);
        showObjects(snapshot.objects);
        status.textContent = "";
        document.body.dataset.updated = String(snapshot.time);
      } catch (error) {
        status.textContent = "Cannot reach the proxy: " + error.message;
      }
    }

    document.getElementById("previous").onclick = () => { offset = Math.max(0, offset - limit); poll(); };
    document.getElementById("next").onclick = () => { offset += limit; poll(); };
    poll();
    setInterval(poll, 2000);
    </script>
    </body>
    </html>
    """#
}
