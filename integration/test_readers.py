"""Who reads what: every open is tied to the process behind it, and
`mediafs status --readers` (and `--json`, and the metrics by process name)
says what each read and what the network fetched for it. Each reader's
bytes are checked against its own count and the server's log, never the
clock; a command line's secrets never reach the listing."""

import json
import os
import subprocess
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from harness import data_of, free_port, mediafs, mount_listed, stop_popen, wait_until, xget

MiB = 1024 * 1024

# Reads a file whole in 64 KiB reads and prints how many bytes it read.
COUNTING_READER = ("import os, sys\n"
                   "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
                   "n = 0\n"
                   "while True:\n"
                   "    b = os.read(fd, 65536)\n"
                   "    if not b: break\n"
                   "    n += len(b)\n"
                   "print(n)\n")


def readers(m):
    r = mediafs("status", m.mountpoint, "--readers", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["readers"]


def dd_count(stderr):
    return int(next(line for line in stderr.splitlines() if "bytes" in line and "copied" in line).split()[0])


def sent_for(srv, name):
    return sum(r.bytes_sent for r in srv.requests if r.method == "GET" and r.name == name)


def test_four_readers_at_once_are_each_attributed_what_they_read_and_fetched(mount, srv):
    """cat, dd, head and a Python reader read four files at once: each is
    listed by pid and name with its file, its bytes read equal to its own
    count (within 1%), its bytes fetched equal to what the server sent for
    its file, and the metrics count the same by process name."""
    sizes = {"c.bin": 6 * MiB, "d.bin": 5 * MiB + 12345, "h.bin": 3 * MiB + 7, "p.bin": 4 * MiB}
    files = {name: data_of(size, 70 + i) for i, (name, size) in enumerate(sizes.items())}
    port = free_port()
    m = mount_listed(mount, srv, files, extra=["--metrics", f"127.0.0.1:{port}"])
    procs = {
        "c.bin": subprocess.Popen(["cat", m.path("c.bin")], stdout=subprocess.DEVNULL),
        "d.bin": subprocess.Popen(["dd", f"if={m.path('d.bin')}", "of=/dev/null", "bs=1M"],
                                  stderr=subprocess.PIPE, text=True),
        "h.bin": subprocess.Popen(["head", "-c", str(sizes["h.bin"]), m.path("h.bin")], stdout=subprocess.DEVNULL),
        "p.bin": subprocess.Popen([sys.executable, "-c", COUNTING_READER, m.path("p.bin")],
                                  stdout=subprocess.PIPE, text=True),
    }
    try:
        outputs = {name: proc.communicate(timeout=120) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            stop_popen(proc)
    for name, proc in procs.items():
        assert proc.returncode == 0, (name, outputs[name])
    # Their own counts: dd's "N bytes … copied", the Python reader's print;
    # cat and head read the file whole (exit 0 after the last byte).
    own = dict(sizes)
    own["d.bin"] = dd_count(outputs["d.bin"][1])
    own["p.bin"] = int(outputs["p.bin"][0])
    assert own == sizes, own
    srv.wait_idle(30)
    wait_until(lambda: all(r["ended"] is not None for r in readers(m)) and len(readers(m)) >= 4,
               "every reader's last close to reach the daemon")
    listed = {os.path.basename(r["file"]): r for r in readers(m) if r["pid"] in {p.pid for p in procs.values()}}
    assert sorted(listed) == sorted(sizes), readers(m)
    expected_names = {"c.bin": "cat", "d.bin": "dd", "h.bin": "head",
                      "p.bin": os.path.basename(sys.executable)[:15]}
    for name, row in listed.items():
        assert row["pid"] == procs[name].pid, row
        assert row["process"] == expected_names[name], row
        assert row["class"] == "play", row
        assert abs(row["bytes_read"] - own[name]) <= own[name] // 100, (name, row, own[name])
        assert row["bytes_fetched"] == sent_for(srv, name), (name, row, sent_for(srv, name))
        assert row["bytes_fetched"] >= sizes[name], (name, row)
        assert row["open_handles"] == 0 and row["since"] <= row["ended"], row
        assert "\n" not in row["arguments"], row
    # The metrics: the same bytes, by class and process name.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    read_by = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "mediafs_reader_read_bytes_total":
                read_by[(sample.labels["class"], sample.labels["process"])] = sample.value
    for name, row in listed.items():
        assert read_by[("play", row["process"])] >= row["bytes_read"], (read_by, row)
    assert read_by[("play", "cat")] == listed["c.bin"]["bytes_read"], read_by


def test_the_python_reader_and_dd_count_what_they_say_they_read(mount, srv):
    """The readers' own counts, taken from their output: dd's byte count
    and a Python reader's, each equal (within 1%) to its listed bytes."""
    files = {"d.bin": data_of(3 * MiB + 1, 80), "p.bin": data_of(2 * MiB + 3, 81)}
    m = mount_listed(mount, srv, files)
    dd = subprocess.run(["dd", f"if={m.path('d.bin')}", "of=/dev/null", "bs=256k"],
                        capture_output=True, text=True, timeout=120)
    assert dd.returncode == 0, dd.stderr
    dd_bytes = dd_count(dd.stderr)
    py = subprocess.Popen([sys.executable, "-c", COUNTING_READER, m.path("p.bin")], stdout=subprocess.PIPE, text=True)
    try:
        py_bytes = int(py.communicate(timeout=120)[0])
    finally:
        stop_popen(py)
    assert (dd_bytes, py_bytes) == (len(files["d.bin"]), len(files["p.bin"]))
    wait_until(lambda: sum(1 for r in readers(m) if r["ended"] is not None) >= 2, "both closes to reach the daemon")
    rows = {os.path.basename(r["file"]): r for r in readers(m)}
    for name, count in (("d.bin", dd_bytes), ("p.bin", py_bytes)):
        assert abs(rows[name]["bytes_read"] - count) <= count // 100, (name, rows[name], count)


def test_processes_reading_a_descriptor_another_opened_are_each_attributed_what_they_read(mount, srv):
    """A handle shared across fork: this test's process opens the file and
    dd reads it as its stdin; a shell opens another and two of its children
    (head, then cat) read it in turn. Each reading process is listed by its
    own pid and name with the bytes it read (dd's own count within 1%; head
    and cat together the whole file), and ends with the handle; the openers
    read nothing. What the handle's transfers fetched stays in its
    opener's account (the server's log says how much)."""
    files = {"d.bin": data_of(5 * MiB + 777, 95), "s.bin": data_of(4 * MiB + 5, 96)}
    m = mount_listed(mount, srv, files)
    with open(m.path("d.bin"), "rb") as shared:
        dd = subprocess.run(["dd", "of=/dev/null", "bs=1M"], stdin=shared, capture_output=True, text=True,
                            timeout=120)
    assert dd.returncode == 0, dd.stderr
    dd_bytes = dd_count(dd.stderr)
    assert dd_bytes == len(files["d.bin"])
    # The group is not the shell's last command, so the shell forks head
    # and cat rather than becoming cat (its pid would be the opener's).
    shell = subprocess.Popen(["sh", "-c", '{ head -c 1048576 >/dev/null; cat >/dev/null; } < "$1"; true',
                              "sh", m.path("s.bin")])
    try:
        assert shell.wait(timeout=120) == 0
    finally:
        stop_popen(shell)
    srv.wait_idle(30)
    wait_until(lambda: sum(1 for r in readers(m) if r["ended"] is not None) >= 5,
               "every reader's last close to reach the daemon")
    rows = readers(m)
    by_file = {name: [r for r in rows if os.path.basename(r["file"]) == name] for name in files}
    # d.bin: this process opened it, dd read it.
    opener = [r for r in by_file["d.bin"] if r["pid"] == os.getpid()]
    reader = [r for r in by_file["d.bin"] if r["process"] == "dd"]
    assert len(opener) == 1 and len(reader) == 1, by_file["d.bin"]
    assert abs(reader[0]["bytes_read"] - dd_bytes) <= dd_bytes // 100, (reader[0], dd_bytes)
    assert opener[0]["bytes_read"] == 0, opener[0]
    assert opener[0]["bytes_fetched"] == sent_for(srv, "d.bin") >= len(files["d.bin"]), opener[0]
    assert reader[0]["bytes_fetched"] == 0, reader[0]
    assert reader[0]["ended"] is not None and reader[0]["open_handles"] == 0, reader[0]
    # s.bin: the shell opened it, head and then cat read it.
    names = {r["process"]: r for r in by_file["s.bin"]}
    assert set(names) == {"sh", "head", "cat"} or set(names) == {"dash", "head", "cat"}, by_file["s.bin"]
    shell_row = names.get("sh") or names.get("dash")
    assert shell_row["pid"] == shell.pid and shell_row["bytes_read"] == 0, shell_row
    assert names["head"]["bytes_read"] >= 1 * MiB, names["head"]
    assert names["cat"]["bytes_read"] > 0, names["cat"]
    total = names["head"]["bytes_read"] + names["cat"]["bytes_read"]
    assert abs(total - len(files["s.bin"])) <= len(files["s.bin"]) // 100, (names, len(files["s.bin"]))


def test_a_readers_command_line_is_listed_short_and_without_secrets(mount, srv):
    """A reader whose arguments carry a URL with a password and a token: the
    listing (text and JSON) names the process and its parent, and holds
    neither secret; a live reader is listed as live."""
    files = {"a.bin": data_of(1 * MiB, 90)}
    m = mount_listed(mount, srv, files)
    # The secrets come first, so the short form (160 bytes) reaches them.
    holder = "import os,sys;f=os.open(sys.argv[4],0);os.read(f,4096);print('ready',flush=True);sys.stdin.read()"
    proc = subprocess.Popen([sys.executable, "-c", holder,
                             "-progressurl", "http://127.0.0.1:32400/x/progress?X-Plex-Token=TOKEN123",
                             "https://user:PASSWORD456@host.example/a.mkv", m.path("a.bin")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        rows = [r for r in readers(m) if r["pid"] == proc.pid]
        assert len(rows) == 1, readers(m)
        row = rows[0]
        assert row["ended"] is None and row["open_handles"] == 1, row
        assert row["parent"] != "", row
        assert "-progressurl http://127.0.0.1:32400/x/progress" in row["arguments"], row
        assert "https://host.example/a.mkv" in row["arguments"], row
        text = mediafs("status", m.mountpoint, "--readers")
        assert text.returncode == 0, text.stderr
        assert str(proc.pid) in text.stdout and "a.bin" in text.stdout, text.stdout
        whole = mediafs("status", m.mountpoint, "--json").stdout + text.stdout + xget(m.mountpoint, "readers")
        for secret in ("TOKEN123", "PASSWORD456", "user:"):
            assert secret not in whole, secret
    finally:
        proc.stdin.close()
        stop_popen(proc)
