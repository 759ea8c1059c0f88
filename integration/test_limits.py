"""The cache limits hold at every instant, not at every eviction pass: a
write that does not fit is not cached (its bytes still reach the reader)
and the evictor is woken at once. Sampled while a 256 MiB file streams
through a 64 MiB cache, the cache directory never holds more than the
limit plus file-system overhead."""

import hashlib
import os
import threading

from harness import disk_usage, read_whole

MiB = 1024 * 1024
LIMIT = 64 * MiB
# On top of the limit: metadata, the lock file, and file-system blocks that
# the byte count cannot see (partial blocks at the edges of punched ranges,
# extent-tree blocks of a sparse file); seen here: up to 0.4 MiB.
SLACK = 1 * MiB
DEBUG = ["-d"] if os.environ.get("MEDIAFS_TEST_DEBUG") else []


def test_a_stream_larger_than_the_cache_never_takes_more_than_the_limit(mount, server, source):
    m = mount(server.url("big.bin"), extra=["--cache-max-size", "64M", "--no-passthrough"] + DEBUG)
    peak = 0
    samples = 0
    done = threading.Event()

    def sample():
        nonlocal peak, samples
        while not done.is_set():
            peak = max(peak, disk_usage(m.cache_dir))
            samples += 1
            done.wait(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        got = read_whole(m.path("big.bin"))
    finally:
        done.set()
        sampler.join()
    expected = source("big.bin").read_bytes()
    assert hashlib.sha256(got).digest() == hashlib.sha256(expected).digest(), "wrong bytes read"
    print(f"peak cache usage {peak / MiB:.1f} MiB over {samples} samples (limit 64 MiB)")
    assert samples > 10
    assert peak <= LIMIT + SLACK, f"the cache held {peak} bytes under a {LIMIT}-byte limit"
