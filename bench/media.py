"""Scenarios 4 and 5 (`--only ffprobe`, `--only seek`): ffprobe on the mp4
and the mkv, and ffmpeg seeking to 90 s and decoding 1 s, each cold through
a fresh mount; curl's column is the same command on the http:// URL (ffmpeg's
own HTTP client). After the run, what the same commands read() from the
local files (strace) and the least any reader needs for the seek: the
report's reader demand.
"""
import json
import os
import shutil
import subprocess
import time

import rig


def ffprobe(b):
    media(b, "ffprobe", "ffprobe", [b.mp4, b.mkv],
          lambda f: ["ffprobe", "-v", "error", "-show_format", "-show_streams", f])


def seek(b):
    media(b, "seek", "seek", [b.mp4, b.mkv],
          lambda f: ["ffmpeg", "-nostdin", "-v", "error", "-ss", "90", "-i", f, "-t", "1", "-f", "null", "-"])


# -- each file's command via a mount, or ffmpeg's own http client on its URL
def media(b, scenario, key, files, argv_for):
    for src in files:
        kind = os.path.splitext(src)[1][1:]
        skey = f"{scenario}_{kind}"

        def curl(src=src, skey=skey):
            b.warm_source(src)
            m = b.nginx.mark()
            t0 = time.perf_counter()
            rig.run_waited(argv_for(b.nginx.url(src)), stdout=subprocess.DEVNULL)
            dt = time.perf_counter() - t0
            s = b.record_server(skey, "curl", b.nginx.since(m))
            b.put(f"{skey}_s", "curl", dt)
            b.put(f"{skey}_bytes", "curl", s["bytes"])

        def fs(tool, src=src, skey=skey):
            def run():
                b.warm_source(src)
                cache = b.fresh_dir(f"cache-{skey}-{tool}")
                m = b.nginx.mark()
                with b.mount(tool, [src], cache, skey) as mnt:
                    t0 = time.perf_counter()
                    rig.run_waited(argv_for(os.path.join(mnt.mp, os.path.basename(src))),
                                   stdout=subprocess.DEVNULL)
                    dt = time.perf_counter() - t0
                s = b.record_server(skey, tool, b.nginx.since(m))
                b.put(f"{skey}_s", tool, dt)
                b.put(f"{skey}_bytes", tool, s["bytes"])
                shutil.rmtree(cache, ignore_errors=True)
            return run

        b.guarded(skey, "curl", curl)
        for tool in b.tools:
            if tool != "curl":
                b.guarded(skey, tool, fs(tool))


# -- what the readers themselves need, from the local files (no server involved)
def app_read_bytes(argv, path):
    """Bytes the program read() from `path` (strace -y over the local file), or None."""
    if shutil.which("strace") is None:
        return None
    out = os.path.join(rig.WORK, "strace.txt")
    subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=read,pread64,preadv", "-e", "signal=none",
                    "-o", out] + argv, check=True, timeout=300,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    total = 0
    with open(out, errors="replace") as f:
        for line in f:
            if f"<{path}>" in line and "=" in line:
                ret = line.rsplit("=", 1)[1].split()[0]
                if ret.lstrip("-").isdigit() and int(ret) > 0:
                    total += int(ret)
    return total


def seek_floor(path, seek_s=90.0, dur_s=1.0):
    """Least bytes any reader needs for `-ss 90 -t 1`: the container's own bytes (an mp4's non-mdat
    boxes; an mkv's bytes before the first and after the last packet: header, SeekHead, Cues) + the
    packet span from the last video keyframe at or before 90 s to the last packet before 91 s."""
    import struct
    boxes, off, n = 0, 0, os.path.getsize(path)
    with open(path, "rb") as f:
        while path.endswith(".mp4") and off < n:
            f.seek(off)
            head = f.read(16)
            size, kind = struct.unpack(">I4s", head[:8])
            if size == 1:
                size = struct.unpack(">Q", head[8:16])[0]
            elif size == 0:
                size = n - off
            if kind != b"mdat":
                boxes += size
            off += size
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries",
                          "packet=stream_index,pts_time,pos,size,flags", "-of", "json", path],
                         check=True, capture_output=True, text=True, timeout=300).stdout
    packets = [p for p in json.loads(out)["packets"] if "pos" in p and "pts_time" in p]
    if not path.endswith(".mp4"):
        boxes = min(int(p["pos"]) for p in packets) + n - max(int(p["pos"]) + int(p["size"]) for p in packets)
    vstream = min(int(p["stream_index"]) for p in packets if "K" in p.get("flags", "")
                  and float(p["pts_time"]) > 0)  # the video stream has keyframes after t=0
    keys = [float(p["pts_time"]) for p in packets if int(p["stream_index"]) == vstream
            and "K" in p.get("flags", "")]
    start_key = max(p for p in keys if p <= seek_s)
    start = min(int(p["pos"]) for p in packets if int(p["stream_index"]) == vstream
                and float(p["pts_time"]) == start_key)
    end = max(int(p["pos"]) + int(p["size"]) for p in packets
              if start_key <= float(p["pts_time"]) < seek_s + dur_s)
    gaps = [b - a for a, b in zip(keys, keys[1:])]
    return {"bytes": boxes + (end - start), "non_mdat_bytes": boxes, "span_start": start, "span_end": end,
            "keyframe_before_seek_s": start_key, "keyframe_interval_s": max(gaps) if gaps else None}


def reader_demand(b, only):
    d = {}
    try:
        if "ffprobe" in only:
            for src in (b.mp4, b.mkv):
                d[f"ffprobe_{os.path.splitext(src)[1][1:]}_app_read"] = app_read_bytes(
                    ["ffprobe", "-v", "error", "-show_format", "-show_streams", src], src)
        if "seek" in only:
            for src in (b.mp4, b.mkv):
                kind = os.path.splitext(src)[1][1:]
                d[f"seek_{kind}_app_read"] = app_read_bytes(
                    ["ffmpeg", "-nostdin", "-v", "error", "-ss", "90", "-i", src, "-t", "1", "-f", "null", "-"],
                    src)
                d[f"seek_{kind}_floor"] = seek_floor(src)
    except Exception as e:  # noqa: BLE001 - informational only
        b.notes.append(f"reader-demand measurement failed: {type(e).__name__}: {e}")
    b.demand = d
