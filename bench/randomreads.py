"""Scenario 3 (`--only random`): 200 random 4 KiB preads of the big file on
one descriptor of a cold mount; curl's column is as many Range GETs over one
keep-alive http.client connection. The offsets are the same every run.
"""
import http.client
import os
import random
import shutil
import statistics
import time

RANDOM_READS = 200
RANDOM_SIZE = 4096


def random_offsets(size):
    """The scenario's offsets in a file of `size` bytes (the JSON keeps them)."""
    rng = random.Random(42)
    return [rng.randrange(0, size - RANDOM_SIZE) for _ in range(RANDOM_READS)]


def run(b):
    big = b.big
    size = os.path.getsize(big)
    offsets = random_offsets(size)
    read_bytes = RANDOM_READS * RANDOM_SIZE

    def store(tool, lat, entries):
        lat_ms = sorted(x * 1000 for x in lat)
        s = b.record_server("random", tool, entries)
        b.put("random_p50_ms", tool, statistics.median(lat_ms))
        b.put("random_p99_ms", tool, lat_ms[min(len(lat_ms) - 1, int(round(0.99 * len(lat_ms))) - 1)])
        b.put("random_server_ratio", tool, s["bytes"] / read_bytes)

    def curl():
        b.warm_source(big)
        m = b.nginx.mark()
        conn = http.client.HTTPConnection("127.0.0.1", b.nginx.port, timeout=30)
        path = "/" + os.path.basename(big)
        lat = []
        try:
            for off in offsets:
                t0 = time.perf_counter()
                conn.request("GET", path, headers={"Range": f"bytes={off}-{off + RANDOM_SIZE - 1}"})
                r = conn.getresponse()
                body = r.read()
                lat.append(time.perf_counter() - t0)
                if r.status != 206 or len(body) != RANDOM_SIZE:
                    raise RuntimeError(f"range GET got {r.status}, {len(body)} bytes")
        finally:
            conn.close()
        store("curl", lat, b.nginx.since(m))

    def fs(tool):
        def run():
            b.warm_source(big)
            cache = b.fresh_dir(f"cache-random-{tool}")
            m = b.nginx.mark()
            with b.mount(tool, [big], cache, "random") as mnt:
                fd = os.open(os.path.join(mnt.mp, os.path.basename(big)), os.O_RDONLY)
                lat = []
                try:
                    for off in offsets:
                        t0 = time.perf_counter()
                        data = os.pread(fd, RANDOM_SIZE, off)
                        lat.append(time.perf_counter() - t0)
                        if len(data) != RANDOM_SIZE:
                            raise RuntimeError(f"pread at {off} returned {len(data)} bytes")
                finally:
                    os.close(fd)
            store(tool, lat, b.nginx.since(m))
            shutil.rmtree(cache, ignore_errors=True)
        return run

    b.guarded("random", "curl", curl)
    for tool in b.tools:
        if tool != "curl":
            b.guarded("random", tool, fs(tool))
