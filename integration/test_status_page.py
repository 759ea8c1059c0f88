"""The status page at `GET /` of `--metrics ADDR:PORT`, loaded in a real
headless browser (Debian's Chromium): its script fetches /status.json and
draws it, and what it shows (each reader's bytes read and fetched, each
file's cached bytes and ranges, the totals) equals what
`mediafs status --json` says at the same moment, with every reader idle.
The page asks for nothing but the mount's own listener. A second test keeps
the page open (Chromium driven over its DevTools pipe) and watches it redraw
as a reader comes, reads on and leaves, and as the mount goes away."""

import json
import os
import select
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


class Browser:
    """Headless Chromium driven over its DevTools pipe (--remote-debugging-pipe:
    commands on its fd 3, answers on its fd 4, each a JSON text ended by a
    NUL), so a test can keep one page open and read its DOM as it redraws,
    with nothing from outside Debian's Chromium and the standard library."""

    def __init__(self, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds():
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(3, 4),
                                     preexec_fn=fds, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.pending = b""
        self.next_id = 0
        self.session = None

    def call(self, method, timeout=60, **params):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self.pending:
                assert time.monotonic() < deadline, f"Chromium did not answer {method} within {timeout} s"
                ready, _, _ = select.select([self.from_browser], [], [], 1)
                if ready:
                    chunk = os.read(self.from_browser, 1 << 16)
                    assert chunk, f"Chromium closed its pipe during {method}"
                    self.pending += chunk
            text, self.pending = self.pending.split(b"\0", 1)
            answer = json.loads(text)
            if answer.get("id") == self.next_id:
                assert "error" not in answer, (method, answer["error"])
                return answer.get("result", {})

    def open(self, url):
        target = self.call("Target.createTarget", url=url)["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def value(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def close(self):
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        stop_popen(self.proc)


# The page's readers table, as the test reads it from the live DOM.
READERS = ("[...document.querySelectorAll('#readers tr[data-pid]')].map(tr => "
           "({pid: +tr.dataset.pid, read: +tr.dataset.bytesRead, fetched: +tr.dataset.bytesFetched, "
           "ended: tr.classList.contains('ended'), file: tr.dataset.file}))")

# Reads as many bytes as each line of its input says, printing its total.
READER = ("import os, sys\n"
          "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
          "n = 0\n"
          "for line in sys.stdin:\n"
          "    want = n + int(line)\n"
          "    while n < want:\n"
          "        b = os.read(fd, min(65536, want - n))\n"
          "        if not b: break\n"
          "        n += len(b)\n"
          "    print(n, flush=True)\n")


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


def test_the_page_redraws_as_a_reader_comes_reads_on_and_leaves_and_says_when_the_mount_is_gone(mount, srv, tmp_path):
    files = {"a.bin": data_of(4 * MiB, 7)}
    port = free_port()
    m = mount_listed(mount, srv, files, extra=["--metrics", f"127.0.0.1:{port}"])
    browser = Browser(tmp_path / "chromium")
    reader = None
    try:
        browser.open(f"http://127.0.0.1:{port}/")
        wait_until(lambda: browser.value("document.body?.dataset.loaded") == "1", "the page's first drawing", timeout=60)
        assert browser.value(READERS) == [], "no reader before any read"

        # A reader comes: the open page shows it, with the bytes it read.
        reader = subprocess.Popen([sys.executable, "-c", READER, m.path("a.bin")],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        reader.stdin.write(f"{MiB}\n")
        reader.stdin.flush()
        assert int(reader.stdout.readline()) == MiB

        def row():
            rows = [r for r in browser.value(READERS) if r["pid"] == reader.pid]
            return rows[0] if rows else None
        wait_until(lambda: row() is not None and row()["read"] >= MiB, "the page to draw the new reader")
        assert row()["file"] == "/a.bin" and not row()["ended"]

        # It reads on: the same page shows the new count, which status --json gives too.
        reader.stdin.write(f"{2 * MiB}\n")
        reader.stdin.flush()
        assert int(reader.stdout.readline()) == 3 * MiB
        wait_until(lambda: row()["read"] >= 3 * MiB, "the page to redraw the reader's bytes")
        listed = [r for r in status_json(m)["readers"] if r["pid"] == reader.pid]
        assert len(listed) == 1 and listed[0]["bytes_read"] == row()["read"], (listed, row())

        # It leaves: drawn as ended, its bytes kept.
        reader.stdin.close()
        assert reader.wait(timeout=30) == 0
        # (The kernel's readahead is counted as read: a little over 3 MiB.)
        wait_until(lambda: row()["ended"], "the page to draw the reader as ended")
        listed = [r for r in status_json(m)["readers"] if r["pid"] == reader.pid]
        assert len(listed) == 1 and listed[0]["ended"] is not None, listed
        wait_until(lambda: row()["read"] == listed[0]["bytes_read"], "the page to show the ended reader's bytes")
        last = row()["read"]
        assert last >= 3 * MiB

        # The mount goes: the page says the mount does not answer and keeps the last rows.
        m.unmount()
        wait_until(lambda: browser.value("document.getElementById('updated').className") == "stale",
                   "the page to say the mount does not answer")
        assert row() is not None and row()["read"] == last, "the last answer stays on the page"
    finally:
        if reader is not None and reader.poll() is None:
            reader.stdin.close()
            stop_popen(reader)
        browser.close()


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
