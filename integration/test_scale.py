"""Many entries under a small descriptor limit: an idle entry holds no
descriptor (data files are opened on demand, a few hundred at most), so a
mount of thousands of URLs under `ulimit -n 256` stats every entry with the
right size and reads files right, and a failed open would cost that read
its cache, never the mount its caching."""

import os
import random
import subprocess

from harness import read_whole

ENTRIES = 3000
NOFILE = 256


def open_descriptors(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_thousands_of_entries_under_a_256_descriptor_limit_stat_and_read_right(mount, server, source, tmp_path):
    expected = source("small.bin").read_bytes()
    listing = tmp_path / "many.list"
    listing.write_text("".join(f"f{i:05d}.bin\t{server.url('small.bin')}?n={i}\n" for i in range(ENTRIES)))
    m = mount(listing)
    subprocess.run(["prlimit", "--pid", str(m.pid), f"--nofile={NOFILE}:{NOFILE}"], check=True)
    names = sorted(os.listdir(m.mountpoint))
    assert len(names) == ENTRIES
    sizes = {name: os.stat(m.path(name)).st_size for name in names}
    assert set(sizes.values()) == {len(expected)}, "every entry stats with the served file's size"
    for name in random.Random(7).sample(names, 300):
        assert read_whole(m.path(name)) == expected, f"{name}: wrong bytes"
    assert open_descriptors(m.pid) <= NOFILE
    log = m.stderr()
    assert "without caching" not in log and "Too many open files" not in log, log[-2000:]
    # Every file read was cached: read again, the server sees no request.
    server.clear_log()
    for name in random.Random(7).sample(names, 300)[:50]:
        assert read_whole(m.path(name)) == expected
    assert server.log() == [], "cached files were fetched again"
