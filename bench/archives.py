"""The bench's archive scenario (`--only archives`): the bench's 2-minute mkv
stored in a ZIP (Python's zipfile, ZIP_STORED) beside the same film as a
plain file, in one nginx autoindex directory, mounted as a listing through
bench/linkem.py at 100 ms / 50 Mbit/s. Each row runs on the member and on the
plain file, each cold (a fresh cache and mount): the listing with the
archive's index, ffprobe, the first 3 s, a seek to 90 s, and a sequential
read of the whole film; time, requests and bytes at nginx.

Not here (named in its README): a 7-volume RAR5 film. `rar` is not free
software and this project has no RAR writer of its own yet.

Driven by bench/run.py; reuses its nginx, Mount, drop_caches and the WAN
scenario's link emulator, commands and RUNS.
"""
import os
import shutil
import subprocess
import time
import zipfile

import run as B
import wan as W

RTT_MS, MBIT = 100, 50
RUNS = W.RUNS
DIR = "archives"
MEMBER = "Film (2026)/film.mkv"
ROWS = (("probe", "ffprobe -show_format -show_streams", W.ffprobe),
        ("first3s", "decode the first 3 s", W.first3s),
        ("seek", "seek to 90 s, decode 1 s", W.seek),
        ("seq", "read the whole film", None))


def ensure_media(mkv):
    d = os.path.join(B.DATA, DIR)
    zip_path = os.path.join(d, "film.zip")
    plain = os.path.join(d, "film.mkv")
    if not (os.path.exists(zip_path) and os.path.exists(plain) and os.path.getsize(plain) == os.path.getsize(mkv)):
        os.makedirs(d, exist_ok=True)
        shutil.copy(mkv, plain)
        with zipfile.ZipFile(zip_path + ".tmp", "w", compression=zipfile.ZIP_STORED) as archive:
            archive.write(mkv, MEMBER)
        os.rename(zip_path + ".tmp", zip_path)
    return d


class ArchivesBench:
    def __init__(self, b):
        self.b = b
        self.results = {}   # row -> "member"|"plain" -> median run {"s", "requests", "bytes", "runs_s"}
        self.size = 0

    def run(self):
        ensure_media(self.b.mkv)
        self.size = os.path.getsize(self.b.mkv)
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, MBIT) as em:
            self.em = em
            for key, _, argv in (("index", "list the directory and stat the member", None), *ROWS):
                for which in ("member", "plain"):
                    self.b.guarded(f"archives {key} {which}", "mediafs", lambda: self.row(key, argv, which))

    def paths(self, mp):
        """The member's and the plain film's paths in a mount of the directory
        (its entries at the mount's root, or under one folder)."""
        base = mp if "film" in os.listdir(mp) else os.path.join(mp, os.listdir(mp)[0])
        return {"member": os.path.join(base, "film", MEMBER), "plain": os.path.join(base, "film.mkv")}

    def row(self, key, argv, which):
        runs = []
        for i in range(RUNS):
            B.drop_caches()
            for p in (os.path.join(B.DATA, DIR, "film.zip"), os.path.join(B.DATA, DIR, "film.mkv")):
                B.read_local(p)
            cache = self.b.fresh_dir("cache-archives")
            mp = self.b.mountpoint("mediafs")
            m = self.b.nginx.mark()
            t0 = time.perf_counter()
            with B.Mount("mediafs", [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30",
                                     self.em.base() + DIR + "/", mp], mp, f"mediafs-archives-{key}-{which}-{i}.log",
                         self.b) as mnt:
                path = self.paths(mnt.mp)[which]
                # The stat is part of every row: the plain file's lookup
                # fetches its first bytes, which its command then reads from
                # the cache; a member's size comes from the index.
                os.stat(path)
                if key != "index":
                    if argv is None:
                        n, _ = B.read_local(path)
                        if n != self.size:
                            raise RuntimeError(f"read {n} bytes of {path}, expected {self.size}")
                    else:
                        B.run_waited(argv(path), stdout=subprocess.DEVNULL)
                dt = time.perf_counter() - t0
            entries = self.b.nginx.since(m, settle=0.3 + RTT_MS / 1000)
            runs.append({"s": dt, "requests": len(entries), "bytes": sum(e.get("bytes", 0) for e in entries)})
            shutil.rmtree(cache, ignore_errors=True)
        cell = sorted(runs, key=lambda r: r["s"])[len(runs) // 2]
        cell["runs_s"] = [r["s"] for r in runs]
        self.results.setdefault(key, {})[which] = cell

    def report(self):
        if not self.results:
            return
        print()
        print(f"Archives (bench/archives.py) through bench/linkem.py at {RTT_MS} ms / {MBIT} Mbit/s: the bench's mkv "
              f"({B.human(self.size)}) stored in a ZIP beside the same film plain, one nginx autoindex directory "
              "mounted as a listing, each cell cold (fresh cache and mount).")
        print(f"cells: median seconds of {RUNS} runs from the mount's start to the command's end: the mount, the "
              "listing (with the archive's index), the stat and the command (requests, bytes at nginx in that run).")
        table = []
        for key, label, _ in (("index", "list + index + stat", None), *ROWS):
            cells = self.results.get(key, {})
            member, plain = cells.get("member"), cells.get("plain")

            def show(c):
                return f"{W.secs(c['s'])} ({c['requests']}, {B.human(c['bytes'])})" if c else "ERROR"
            ratio = member["s"] / plain["s"] if member and plain and plain["s"] else None
            goal = "-" if key == "index" else ("PASS" if ratio is not None and ratio <= 1.05 else "MISS")
            table.append([label, show(member), show(plain), f"{ratio:.2f}" if ratio else "-", goal])
        B.print_table(["row", "member of a ZIP", "plain file", "÷ plain", "≤1.05×"], table)

    def json(self):
        return {"size": self.size, "results": self.results}
