// `GET /` on the admin listener: one page, nothing fetched from elsewhere
// (it works offline), no write action. Its script asks `/status.json`
// every second and draws it: the budgets, the sources, each file in use
// with its cached and in-flight ranges as a bar, and the readers. Text is
// set with textContent, never as HTML: names and command lines are the
// readers' own. Each figure also sits exact in a data- attribute, which
// the test reads in a real browser against `mediafs status --json`.
enum StatusPage {
    static let html = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>mediafs</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; background: #fafafa; }
h1 { font-size: 1.3em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .4em; }
#updated { color: #666; } #updated.stale { color: #b00; font-weight: bold; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: .25em .6em; border-bottom: 1px solid #e4e4e4; vertical-align: top; }
th { font-weight: 600; color: #555; } td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { position: relative; height: 12px; min-width: 240px; background: #e8e8e8; border-radius: 2px; overflow: hidden; }
.bar span { position: absolute; top: 0; bottom: 0; }
.bar .cached { background: #3a7bd5; } .bar .flight { background: #f0a030; opacity: .9; }
.legend span { display: inline-block; width: .9em; height: .9em; vertical-align: middle; margin: 0 .3em 0 1em; }
.class-play { color: #1a6d1a; } .class-scan { color: #555; } .class-background { color: #8a4b00; }
.args { color: #777; font-size: .9em; } .unreachable { color: #b00; } .ended td { color: #999; }
.meter { display: inline-block; width: 160px; height: 10px; background: #e8e8e8; vertical-align: middle; margin-left: .5em; }
.meter span { display: block; height: 100%; background: #3a7bd5; } .empty { color: #888; font-style: italic; }
</style>
</head>
<body>
<h1>mediafs</h1>
<div id="updated">waiting for the first answer…</div>
<h2>Budgets</h2>
<table id="budgets"><tbody></tbody></table>
<h2>Sources</h2>
<table id="sources"><thead><tr><th>origin</th><th>state</th><th>since</th><th>error</th></tr></thead><tbody></tbody></table>
<h2>Files in use <span class="legend"><span class="cached" style="background:#3a7bd5"></span>cached<span style="background:#f0a030"></span>in flight</span></h2>
<table id="files"><thead><tr><th>file</th><th>cached</th><th></th><th>state</th><th>handles</th></tr></thead><tbody></tbody></table>
<h2>Readers</h2>
<table id="readers"><thead><tr><th>pid</th><th>process</th><th>class</th><th>file</th><th>read</th><th>fetched</th><th>rate</th><th>since</th></tr></thead><tbody></tbody></table>
<script>
"use strict";
function human(n) {
  if (n === undefined || n === null) return "?";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n, u = 0;
  while (v >= 1024 && u < units.length - 1) { v /= 1024; u++; }
  return (u === 0 ? String(v) : v.toFixed(1)) + " " + units[u];
}
function clock(seconds) { return seconds ? new Date(seconds * 1000).toLocaleTimeString() : ""; }
function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
function cell(row, text, cls) { const td = el("td", text, cls); row.appendChild(td); return td; }
function fill(id, rows, emptyText, columns) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren(...rows);
  if (rows.length === 0) { const tr = el("tr"); const td = cell(tr, emptyText, "empty"); td.colSpan = columns; body.appendChild(tr); }
}
function bar(size, cached, flight) {
  const b = el("div", undefined, "bar");
  for (const [ranges, cls] of [[cached, "cached"], [flight, "flight"]]) {
    if (!size) continue;
    for (const [start, end] of ranges) {
      const s = el("span", undefined, cls);
      s.style.left = (100 * start / size) + "%";
      s.style.width = Math.max(0.15, 100 * (end - start) / size) + "%";
      b.appendChild(s);
    }
  }
  return b;
}
function meter(used, limit) {
  const m = el("span", undefined, "meter"), f = el("span");
  f.style.width = Math.min(100, limit > 0 ? 100 * used / limit : 0) + "%";
  m.appendChild(f);
  return m;
}
function budgets(t) {
  const rows = [];
  function add(key, label, used, limit, extra) {
    const tr = el("tr"); tr.dataset.key = key; tr.dataset.used = used;
    if (limit !== undefined) tr.dataset.limit = limit;
    cell(tr, label);
    const td = cell(tr, human(used) + (limit > 0 ? " of " + human(limit) : "") + (extra || ""), "n");
    if (limit) td.appendChild(meter(used, limit));
    rows.push(tr);
  }
  add("cache", "cache", t.cached_bytes, t.cache_max_size, t.pinned_bytes ? " (" + human(t.pinned_bytes) + " pinned)" : "");
  if (t.background_daily_limit !== undefined) add("background_daily", "background today (UTC)", t.background_daily_used, t.background_daily_limit);
  add("network", "fetched since mount", t.bytes_from_network, undefined, ", " + human(t.bytes_from_cache) + " served from the cache");
  for (const c of ["play", "scan", "background"]) {
    add(c, c, t[c + "_bytes_fetched"], undefined, " fetched, " + human(t[c + "_bytes_served"]) + " read");
  }
  fill("budgets", rows, "", 2);
}
function render(s) {
  budgets(s.totals);
  fill("sources", s.sources.map(src => {
    const tr = el("tr"); tr.dataset.origin = src.origin;
    cell(tr, src.origin); cell(tr, src.state, src.state === "unreachable" ? "unreachable" : "");
    cell(tr, clock(src.since)); cell(tr, src.error || "");
    return tr;
  }), "no listed source", 4);
  fill("files", s.files.map(f => {
    const tr = el("tr"); tr.dataset.name = f.name; tr.dataset.cachedBytes = f.cached_bytes;
    if (f.size !== undefined) tr.dataset.size = f.size;
    cell(tr, f.name);
    const share = f.size ? 100 * f.cached_bytes / f.size : 0;
    cell(tr, human(f.cached_bytes) + " of " + human(f.size) + " (" + share.toFixed(1) + "%)", "n");
    cell(tr).appendChild(bar(f.size, f.cached_ranges, f.in_flight));
    cell(tr, f.state + (f.pinned ? ", pinned" : ""));
    cell(tr, String(f.open_handles), "n");
    return tr;
  }), "no file in use", 5);
  fill("readers", s.readers.map(r => {
    const tr = el("tr", undefined, r.ended === null ? "" : "ended");
    Object.assign(tr.dataset, { pid: r.pid, process: r.process, readerClass: r.class, file: r.file,
                                bytesRead: r.bytes_read, bytesFetched: r.bytes_fetched });
    cell(tr, String(r.pid), "n");
    const who = cell(tr, r.process);
    who.appendChild(el("div", r.arguments + (r.parent ? "  (parent " + r.parent + ")" : ""), "args"));
    cell(tr, r.class, "class-" + r.class);
    cell(tr, r.file);
    cell(tr, human(r.bytes_read) + (r.kernel_reads ? "+" : ""), "n"); cell(tr, human(r.bytes_fetched), "n");
    cell(tr, r.ended === null ? human(r.bytes_per_second) + "/s" : "ended " + clock(r.ended), "n");
    cell(tr, clock(r.since));
    return tr;
  }), "no reader", 8);
}
async function refresh() {
  const updated = document.getElementById("updated");
  try {
    const answer = await fetch("/status.json", { cache: "no-store" });
    if (!answer.ok) throw new Error("HTTP " + answer.status);
    render(await answer.json());
    updated.textContent = "updated " + new Date().toLocaleTimeString();
    updated.className = ""; document.body.dataset.loaded = "1";
  } catch (e) {
    updated.textContent = "the mount does not answer (" + e.message + "); showing the last answer";
    updated.className = "stale";
  } finally {
    setTimeout(refresh, 1000);
  }
}
refresh();
</script>
</body>
</html>
"""#
}
