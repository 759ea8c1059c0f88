"""The status page at `GET /` of `--metrics ADDR:PORT`, loaded in a real
headless browser (Debian's Chromium): its script fetches /status.json and
draws it, and what it shows (each reader's bytes read and fetched, each
file's cached bytes and ranges, the totals) equals what
`mediafs status --json` says at the same moment, with every reader idle.
The page asks for nothing but the mount's own listener."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser

import pytest

from harness import data_of, free_port, mediafs, mount_listed, stop_popen, wait_until

MiB = 1024 * 1024

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") is None,
    reason="NO CHROMIUM: the status page is not tested in a browser (apt-get install chromium)")

# Reads the first N bytes of a file, says so, and holds it open until told.
HOLDER = ("import os, sys\n"
          "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
          "n, want = 0, int(sys.argv[2])\n"
          "while n < want:\n"
          "    b = os.read(fd, min(65536, want - n))\n"
          "    if not b: break\n"
          "    n += len(b)\n"
          "print(n, flush=True)\n"
          "sys.stdin.read()\n")


class Rows(HTMLParser):
    """Every <tr> with data- attributes, by its table's id."""

    def __init__(self):
        super().__init__()
        self.table = None
        self.rows = {}
        self.spans = {}  # file name -> classes of its bar's spans
        self.row_name = None
        self.body = {}

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.table = attrs.get("id")
        elif tag == "body":
            self.body = attrs
        elif tag == "tr":
            data = {k[5:]: v for k, v in attrs.items() if k.startswith("data-")}
            self.row_name = data.get("name")
            if data:
                self.rows.setdefault(self.table, []).append(data)
        elif tag == "span" and self.table == "files" and self.row_name is not None:
            self.spans.setdefault(self.row_name, []).append(attrs.get("class"))


def page_dom(port, profile):
    """The page's DOM after its script ran, as Chromium dumps it."""
    proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                             f"--user-data-dir={profile}", "--virtual-time-budget=3000", "--dump-dom",
                             f"http://127.0.0.1:{port}/"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        stop_popen(proc)
    assert proc.returncode == 0, err[-2000:]
    parser = Rows()
    parser.feed(out)
    assert parser.body.get("data-loaded") == "1", f"the page's script drew nothing:\n{out[:2000]}\n{err[-2000:]}"
    return parser


def status_json(m):
    r = mediafs("status", m.mountpoint, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def figures(status):
    readers = sorted((r["pid"], r["file"], r["bytes_read"], r["bytes_fetched"]) for r in status["readers"])
    files = sorted((f["name"], f["cached_bytes"]) for f in status["files"])
    t = status["totals"]
    return readers, files, t["bytes_from_network"], t["cached_bytes"]


def still(m):
    """Whether status --json gives the same figures twice, half a second apart."""
    before = figures(status_json(m))
    time.sleep(0.5)
    return figures(status_json(m)) == before


def test_the_page_in_a_browser_shows_the_readers_files_and_totals_of_status_json(mount, srv, tmp_path):
    files = {"a.bin": data_of(3 * MiB, 1), "b.bin": data_of(5 * MiB + 17, 2), "c.bin": data_of(2 * MiB, 3)}
    port = free_port()
    m = mount_listed(mount, srv, files, extra=["--metrics", f"127.0.0.1:{port}"])
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as answer:
        html = answer.read().decode()
        assert answer.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
    assert "http://" not in html and "https://" not in html, "the page must need nothing from elsewhere"
    # Two readers done, one holding its file open halfway.
    assert subprocess.run(["cat", m.path("a.bin")], stdout=subprocess.DEVNULL, timeout=120).returncode == 0
    dd = subprocess.run(["dd", f"if={m.path('c.bin')}", "of=/dev/null", "bs=256k", "count=4"],
                        capture_output=True, text=True, timeout=120)
    assert dd.returncode == 0, dd.stderr
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, m.path("b.bin"), str(2 * MiB)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(holder.stdout.readline()) == 2 * MiB
        # Idle: both closes reached the daemon and no figure moves (the
        # holder's transfer may stay, held where its reader stopped).
        wait_until(lambda: sum(1 for r in status_json(m)["readers"] if r["ended"] is not None) >= 2,
                   "both closes to reach the daemon")
        srv.wait_idle(30)
        wait_until(lambda: still(m), "the figures to stop moving")
        page = page_dom(port, tmp_path / "chromium")
        status = status_json(m)
    finally:
        holder.stdin.close()
        stop_popen(holder)

    # Readers: the same rows, the same bytes.
    shown = {(int(r["pid"]), r["file"]): r for r in page.rows["readers"]}
    listed = {(r["pid"], r["file"]): r for r in status["readers"]}
    assert set(shown) == set(listed), (shown, listed)
    for key, row in listed.items():
        assert int(shown[key]["bytes-read"]) == row["bytes_read"], (key, shown[key], row)
        assert int(shown[key]["bytes-fetched"]) == row["bytes_fetched"], (key, shown[key], row)
        assert shown[key]["reader-class"] == row["class"] and shown[key]["process"] == row["process"]
    holders = [r for r in status["readers"] if r["pid"] == holder.pid]
    assert len(holders) == 1 and holders[0]["bytes_read"] >= 2 * MiB and holders[0]["ended"] is None, holders
    assert {r["process"] for r in status["readers"]} >= {"cat", "dd"}

    # Files in use: the held one, with the bytes status lists for it, drawn.
    # (Another file may still be listed while a closed handle's transfer waits out its grace.)
    in_use = {r["name"]: r for r in page.rows["files"]}
    assert "/b.bin" in in_use, in_use
    by_name = {f["name"]: f for f in status["files"]}
    for name, row in in_use.items():
        assert int(row["cached-bytes"]) == by_name[name.lstrip("/")]["cached_bytes"], (name, row)
    assert int(in_use["/b.bin"]["cached-bytes"]) >= 2 * MiB
    assert int(in_use["/b.bin"]["size"]) == len(files["b.bin"])
    assert "cached" in page.spans["/b.bin"], page.spans

    # Totals: what the budgets' rows show.
    budgets = {r["key"]: r for r in page.rows["budgets"]}
    totals = status["totals"]
    assert int(budgets["cache"]["used"]) == totals["cached_bytes"]
    assert int(budgets["cache"]["limit"]) == totals["cache_max_size"]
    assert int(budgets["network"]["used"]) == totals["bytes_from_network"]
    for c in ("play", "scan", "background"):
        assert int(budgets[c]["used"]) == totals[f"{c}_bytes_fetched"], c


def test_the_listener_answers_get_and_head_only_and_names_its_paths(mount, srv):
    port = free_port()
    m = mount_listed(mount, srv, {"a.bin": data_of(1000, 5)}, extra=["--metrics", f"127.0.0.1:{port}"])
    document = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/status.json", timeout=10).read())
    assert set(document) == {"files", "files_in_use", "readers", "sources", "totals"}
    head = urllib.request.Request(f"http://127.0.0.1:{port}/", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as answer:
        assert answer.status == 200 and answer.read() == b""
    for method in ("POST", "PUT", "DELETE"):
        try:
            urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/", data=b"x", method=method),
                                   timeout=10)
            raise AssertionError(f"{method} answered 2xx")
        except urllib.error.HTTPError as e:
            assert e.code == 405 and e.headers["Allow"] == "GET, HEAD", (method, e.code)
    assert os.path.ismount(m.mountpoint)
