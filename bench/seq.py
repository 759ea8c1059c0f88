"""Scenarios 1 and 2 (`--only seq`): the big random file read sequentially,
cold through a fresh mount, then warm on the same mount and after a remount
with the page cache dropped; curl's column is `curl -o /dev/null`, and the
local file for the warm rows. Also measures this machine's limits beside
them: download-and-store, and the disk with O_DIRECT.
"""
import os
import shutil
import subprocess
import time

import rig


def run(b):
    big = b.big
    size = os.path.getsize(big)
    url = b.nginx.url(big)

    def curl():
        b.warm_source(big)
        m = b.nginx.mark()
        t0 = time.perf_counter()
        subprocess.run(["curl", "-sf", "-o", "/dev/null", url], check=True, timeout=600)
        dt = time.perf_counter() - t0
        s = b.record_server("cold_seq", "curl", b.nginx.since(m))
        b.put("cold_seq_mbps", "curl", size / dt / rig.MB)
        b.put("cold_seq_server_ratio", "curl", s["bytes"] / size)
        # What downloading and keeping the bytes costs here: curl writing
        # the file on the filesystem mediafs caches on.
        # Best of two: writeback of earlier runs' dirty pages slows either.
        stored = os.path.join(b.fresh_dir("curl-store"), "file")
        for _ in range(2):
            subprocess.run(["sync"], check=True)
            t0 = time.perf_counter()
            subprocess.run(["curl", "-sf", "-o", stored, url], check=True, timeout=600)
            mbps = size / (time.perf_counter() - t0) / rig.MB
            b.ceilings["store_mbps"] = max(mbps, b.ceilings.get("store_mbps", 0))
            os.unlink(stored)
        # local references for the warm rows
        _, dt = rig.read_local(big)
        b.put("warm_same_mbps", "curl", size / dt / rig.MB)
        rig.drop_caches()
        _, dt = rig.read_local(big)
        b.put("warm_remount_mbps", "curl", size / dt / rig.MB)
        rig.drop_caches()
        n, dt = rig.read_direct(big)
        b.ceilings["disk_direct_mbps"] = n / dt / rig.MB

    def fs(tool):
        def run():
            b.warm_source(big)
            cache = b.fresh_dir(f"cache-seq-{tool}")
            name = os.path.basename(big)
            m = b.nginx.mark()  # before mounting: mount-time requests count too
            with b.mount(tool, [big], cache, "seq-cold") as mnt:
                path = os.path.join(mnt.mp, name)
                n, dt = rig.read_local(path)
                if n != size:
                    raise RuntimeError(f"cold read returned {n} bytes, expected {size}")
                s = b.record_server("cold_seq", tool, b.nginx.since(m, settle=0.5))
                b.put("cold_seq_mbps", tool, size / dt / rig.MB)
                b.put("cold_seq_server_ratio", tool, s["bytes"] / size)
                m = b.nginx.mark()
                n, dt = rig.read_local(path)
                if n != size:
                    raise RuntimeError(f"warm read returned {n} bytes, expected {size}")
                b.put("warm_same_mbps", tool, size / dt / rig.MB)
                if tool == "mediafs":
                    # The first re-read pays one-time costs (dropping the FUSE
                    # page cache for passthrough, or LRU activation); a
                    # second one shows the steady state.
                    _, dt = rig.read_local(path)
                    b.ceilings["warm_same_second_mbps"] = size / dt / rig.MB
                b.record_server("warm_same", tool, b.nginx.since(m, settle=0))
            rig.drop_caches()
            m = b.nginx.mark()
            with b.mount(tool, [big], cache, "seq-remount") as mnt:
                n, dt = rig.read_local(os.path.join(mnt.mp, name))
                if n != size:
                    raise RuntimeError(f"remount read returned {n} bytes, expected {size}")
                b.put("warm_remount_mbps", tool, size / dt / rig.MB)
            b.record_server("warm_remount", tool, b.nginx.since(m))
            shutil.rmtree(cache, ignore_errors=True)
        return run

    b.guarded("seq", "curl", curl)
    for tool in b.tools:
        if tool != "curl":
            b.guarded("seq", tool, fs(tool))

