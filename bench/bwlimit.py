"""Scenario 7 (`--only bwlimit`): the first 32 MiB of the big file, cold,
through a mount under `--bwlimit 8M`; the rate the reader sees (mediafs
only).
"""
import os
import shutil
import time

import rig


def run(b):
    """The first 32 MiB of the big file, cold, under --bwlimit 8M: the
    rate the reader sees (readahead beyond 32 MiB shares the limit)."""
    want = 32 * rig.MiB

    def run():
        b.warm_source(b.big)
        cache = b.fresh_dir("cache-bwlimit")
        with b.mount("mediafs", [b.big], cache, "bwlimit", extra=["--bwlimit", "8M"]) as mnt:
            path = os.path.join(mnt.mp, os.path.basename(b.big))
            total = 0
            t0 = time.perf_counter()
            with open(path, "rb", buffering=0) as f:
                while total < want:
                    chunk = f.read(min(rig.BUF, want - total))
                    if not chunk:
                        raise RuntimeError(f"short read at {total}")
                    total += len(chunk)
            b.put("bwlimit_8m_mibps", "mediafs", total / (time.perf_counter() - t0) / rig.MiB)
        shutil.rmtree(cache, ignore_errors=True)

    if os.path.getsize(b.big) < want:
        b.notes.append("bwlimit: the file is under 32 MiB; scenario skipped")
        return
    b.guarded("bwlimit", "mediafs", run)
