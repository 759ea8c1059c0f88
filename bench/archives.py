"""The bench's archive scenario (`--only archives`): the bench's 2-minute mkv
as 7 RAR5 volumes (stored; written by integration/rar5write.py, as `rar`
is not free software, and checked once with unar when made) and stored in
a ZIP (Python's zipfile, ZIP_STORED), beside the same film as a plain
file, in one nginx autoindex directory, mounted as a listing through
bench/linkem.py at 100 ms / 50 Mbit/s. Each row runs on the RAR member,
the ZIP member and the plain file, each cold (a fresh cache and mount):
the listing with the archives' indexes, ffprobe, the first 3 s, a seek to
90 s, and a sequential read of the whole film; time, requests and bytes
at nginx.

Registered in bench/scenarios.py; uses bench/rig.py's nginx, Mount and
drop_caches, and the WAN scenario's link emulator, commands and RUNS.
"""
import filecmp
import os
import shutil
import subprocess
import time
import zipfile

import rig
import wan as W

import rar5write  # integration/'s, on the path once rig is imported

RTT_MS, MBIT = 100, 50
RUNS = W.RUNS
DIR = "archives"
MEMBER = "Film (2026)/film.mkv"
# The set's folder is named after its base, and "film" is the ZIP's.
RAR_BASE = "film-rar"
VOLUMES = 7
KINDS = ("rar", "zip", "plain")
ROWS = (("probe", "ffprobe -show_format -show_streams", W.ffprobe),
        ("first3s", "decode the first 3 s", W.first3s),
        ("seek", "seek to 90 s, decode 1 s", W.seek),
        ("seq", "read the whole film", None))


def run(b):
    b.parts["archives"] = ArchivesBench(b)
    b.parts["archives"].run()


def ensure_media(mkv):
    d = os.path.join(rig.DATA, DIR)
    zip_path = os.path.join(d, "film.zip")
    plain = os.path.join(d, "film.mkv")
    fresh = not (os.path.exists(zip_path) and os.path.exists(plain) and os.path.getsize(plain) == os.path.getsize(mkv))
    if fresh:
        os.makedirs(d, exist_ok=True)
        shutil.copy(mkv, plain)
        with zipfile.ZipFile(zip_path + ".tmp", "w", compression=zipfile.ZIP_STORED) as archive:
            archive.write(mkv, MEMBER)
        os.rename(zip_path + ".tmp", zip_path)
    if fresh or not all(os.path.exists(os.path.join(d, n)) for n in rar5write.volume_names(RAR_BASE, VOLUMES)):
        write_rar(mkv, d)
    return d


def write_rar(mkv, d):
    """The film as VOLUMES RAR5 volumes in `d`, each a seventh of the film
    and room for its headers, the last what is left. Written aside and
    moved in, the last volume last, once unar extracts the film's bytes
    from them: a set in `d` is a whole and checked one."""
    names = rar5write.volume_names(RAR_BASE, VOLUMES)
    aside = os.path.join(rig.DATA, DIR + "-rar.tmp")
    shutil.rmtree(aside, ignore_errors=True)
    os.makedirs(aside)
    rig.log(f"writing {RAR_BASE}.part1..{VOLUMES}.rar, checking them with unar")
    seventh = -(-os.path.getsize(mkv) // VOLUMES)
    paths = rar5write.write_rar5_volumes(mkv, MEMBER, aside, RAR_BASE, seventh + 1024)
    if [os.path.basename(p) for p in paths] != names:
        raise RuntimeError(f"the writer made {len(paths)} volumes, not {VOLUMES}")
    out = os.path.join(aside, "unar")
    subprocess.run(["unar", "-quiet", "-no-directory", "-output-directory", out, paths[0]], check=True,
                   stdout=subprocess.DEVNULL)
    if not filecmp.cmp(mkv, os.path.join(out, MEMBER), shallow=False):
        raise RuntimeError(f"unar extracted other bytes than {mkv} from {paths[0]}")
    for name in names:
        if os.path.exists(os.path.join(d, name)):
            os.remove(os.path.join(d, name))
    for path in paths:
        os.rename(path, os.path.join(d, os.path.basename(path)))
    shutil.rmtree(aside)


class ArchivesBench:
    def __init__(self, b):
        self.b = b
        self.results = {}   # row -> "rar"|"zip"|"plain" -> median run {"s", "requests", "bytes", "runs_s"}
        self.size = 0
        self.volumes = []   # the RAR volumes' sizes

    def run(self):
        d = ensure_media(self.b.mkv)
        self.size = os.path.getsize(self.b.mkv)
        volumes = [os.path.join(d, n) for n in rar5write.volume_names(RAR_BASE, VOLUMES)]
        self.volumes = [os.path.getsize(p) for p in volumes]
        self.sources = [os.path.join(d, "film.zip"), os.path.join(d, "film.mkv"), *volumes]
        with W.LinkEmulator(self.b.nginx.port, RTT_MS, MBIT) as em:
            self.em = em
            for key, _, argv in (("index", "list the directory and stat the member", None), *ROWS):
                for which in KINDS:
                    self.b.guarded(f"archives {key} {which}", "mediafs", lambda: self.row(key, argv, which))

    def paths(self, mp):
        """The members' and the plain film's paths in a mount of the directory
        (its entries at the mount's root, or under one folder)."""
        base = mp if "film" in os.listdir(mp) else os.path.join(mp, os.listdir(mp)[0])
        return {"rar": os.path.join(base, RAR_BASE, MEMBER), "zip": os.path.join(base, "film", MEMBER),
                "plain": os.path.join(base, "film.mkv")}

    def row(self, key, argv, which):
        runs = []
        for i in range(RUNS):
            rig.drop_caches()
            for p in self.sources:
                rig.read_local(p)
            cache = self.b.fresh_dir("cache-archives")
            mp = self.b.mountpoint("mediafs")
            m = self.b.nginx.mark()
            t0 = time.perf_counter()
            with rig.Mount("mediafs", [self.b.binary, "mount", "-f", "--cache-dir", cache, "--timeout", "30",
                                       self.em.base() + DIR + "/", mp], mp, f"mediafs-archives-{key}-{which}-{i}.log",
                           self.b) as mnt:
                path = self.paths(mnt.mp)[which]
                # The stat is part of every row: the plain file's lookup
                # fetches its first bytes, which its command then reads from
                # the cache; a member's size comes from the index.
                os.stat(path)
                if key != "index":
                    if argv is None:
                        n, _ = rig.read_local(path)
                        if n != self.size:
                            raise RuntimeError(f"read {n} bytes of {path}, expected {self.size}")
                    else:
                        rig.run_waited(argv(path), stdout=subprocess.DEVNULL)
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
              f"({rig.human(self.size)}) as {len(self.volumes)} RAR5 volumes ({rig.human(self.volumes[0])} each, the last "
              f"{rig.human(self.volumes[-1])}) and stored in a ZIP, beside the same film plain, one nginx autoindex "
              "directory mounted as a listing, each cell cold (fresh cache and mount).")
        print(f"cells: median seconds of {RUNS} runs from the mount's start to the command's end: the mount, the "
              "listing (with the archives' indexes), the stat and the command (requests, bytes at nginx in that run).")
        table = []
        for key, label, _ in (("index", "list + index + stat", None), *ROWS):
            cells = self.results.get(key, {})
            plain = cells.get("plain")

            def show(c):
                return f"{W.secs(c['s'])} ({c['requests']}, {rig.human(c['bytes'])})" if c else "ERROR"

            def ratio(c):
                return c["s"] / plain["s"] if c and plain and plain["s"] else None
            ratios = [ratio(cells.get(which)) for which in ("rar", "zip")]
            goal = "-" if key == "index" else ("PASS" if all(r is not None and r <= 1.05 for r in ratios) else "MISS")
            table.append([label, *(show(cells.get(which)) for which in KINDS),
                          *(f"{r:.2f}" if r else "-" for r in ratios), goal])
        rig.print_table(["row", "member of a RAR set", "member of a ZIP", "plain file", "RAR ÷ plain", "ZIP ÷ plain",
                         "both ≤1.05×"], table)

    def json(self):
        return {"size": self.size, "rar_volumes": self.volumes, "results": self.results}
