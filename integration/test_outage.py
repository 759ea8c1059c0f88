"""A server gone under a mount: every name it listed stays, none reads as
0 bytes, cached bytes are served, an uncached read fails with EIO within
--timeout and is logged once per file, not once per read, and `mediafs
status` says since when the source is unreachable; the server back, a
refresh finds it again. An nginx of this module's own, stopped and started
by the test, serves two listed directories (two sources, so each is a
directory of the mount whatever the layout of one)."""

import errno
import os

import pytest

import harness
from conftest import Nginx
from harness import mediafs, read_range, read_whole, xset

SIZE = 3 << 20


@pytest.fixture
def library(tmp_path):
    root = tmp_path / "www"
    files = {"lib/a.bin": harness.data_of(SIZE, seed=1), "lib/b.bin": harness.data_of(SIZE, seed=2),
             "lib/sub/c.bin": harness.data_of(4096, seed=3), "other/d.bin": harness.data_of(8192, seed=4)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    yield from ((server, files) for server in Nginx.serving(tmp_path / "nginx", root, autoindex=True))


def test_a_server_gone_keeps_every_name_serves_the_cache_and_fails_the_rest_once_per_file(mount, library):
    server, files = library
    m = mount(server.url("lib/"), server.url("other/"), extra=("--timeout", "2", "--retries", "1"))
    lib = m.path("lib")
    before = {name: os.stat(os.path.join(lib, name)).st_size for name in os.listdir(lib)}
    assert before == {"a.bin": SIZE, "b.bin": SIZE, "sub": before["sub"]}, before
    assert read_whole(os.path.join(lib, "a.bin")) == files["lib/a.bin"]
    assert read_range(os.path.join(lib, "b.bin"), 0, 4096) == files["lib/b.bin"][:4096]
    assert sorted(os.listdir(m.path("other"))) == ["d.bin"]
    server.stop()

    # A refresh fails, and says so; the names stay, with their sizes.
    with pytest.raises(OSError):
        xset(lib, "refresh", "1")
    assert {name: os.stat(os.path.join(lib, name)).st_size for name in os.listdir(lib)} == before
    assert sorted(os.listdir(m.path("other"))) == ["d.bin"]
    assert read_whole(os.path.join(lib, "a.bin")) == files["lib/a.bin"], "cached bytes are served"
    tail = SIZE - 4096
    for _ in range(3):
        with pytest.raises(OSError) as failed:
            read_range(os.path.join(lib, "b.bin"), tail, 4096)
        assert failed.value.errno == errno.EIO
    lines = [line for line in m.stderr().splitlines()
             if "b.bin" in line and ("warning" in line or "error" in line)]
    assert len(lines) == 1, lines

    status = mediafs("status", m.mountpoint)
    assert status.returncode == 0, status.stderr
    unreachable = [line for line in status.stdout.splitlines() if "unreachable since" in line]
    assert len(unreachable) == 1 and "/lib/" in unreachable[0], status.stdout

    server.start()
    xset(lib, "refresh", "1")
    assert "unreachable since" not in mediafs("status", m.mountpoint).stdout
    # Reads fail at once for a moment after one gave up (the kernel's own
    # retries must not each wait): then the bytes come.

    def tail_read():
        try:
            return read_range(os.path.join(lib, "b.bin"), tail, 4096)
        except OSError:
            return None
    harness.wait_until(tail_read, "a read of b.bin's tail once the server is back")
    assert tail_read() == files["lib/b.bin"][tail:]
    # Said when the transfer ends, which may be after its bytes reached the read.
    assert harness.wait_for_stderr(m, "its server answers again"), m.stderr()[-2000:]
