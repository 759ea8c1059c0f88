"""The RAR5 volume writer (rar5write.py) against a reader no one here
wrote: `unar` lists its sets with lsar, checks every CRC32 with `lsar -t`
and extracts exactly the bytes written. rarfile is not used: it reads
RAR5 volumes, yet unar is the reader the archive tests already trust."""

import json
import os
import random
import shutil

import pytest

import rar5write
from harness import run


@pytest.fixture(scope="module", autouse=True)
def unar():
    missing = [tool for tool in ("unar", "lsar") if not shutil.which(tool)]
    if missing:
        hint = f"needs {' and '.join(missing)} (apt-get install unar; `make deps`)"
        if os.environ.get("CI") == "true":
            pytest.fail(hint)
        pytest.skip("SKIPPED LOUDLY: " + hint)


def source(tmp_path, size, seed):
    path = tmp_path / "source.bin"
    path.write_bytes(random.Random(seed).randbytes(size))
    return path


def listed(first):
    out = run("lsar", "-j", first)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    return doc["lsarContents"], doc["lsarProperties"]


def extracted(first, into):
    out = run("unar", "-quiet", "-no-directory", "-output-directory", into, first, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return {str(p.relative_to(into)): p.read_bytes() for p in into.rglob("*") if p.is_file()}


def check(first):
    """unar's test of the set: every CRC32 it holds, the data read."""
    return run("lsar", "-t", first, timeout=120)


@pytest.mark.parametrize("count, width", [(5, 1), (12, 2)])
def test_unar_extracts_a_set_to_the_bytes_written(tmp_path, count, width):
    size = 3 << 20
    src = source(tmp_path, size, seed=count)
    volume_size = size // (count - 1) - 1  # the headers push a last sliver into the count-th volume
    out = tmp_path / "set"
    out.mkdir()
    paths = rar5write.write_rar5_volumes(src, "Film (2026)/film.bin", out, "film", volume_size, mtime=1_700_000_000)
    assert [os.path.basename(p) for p in paths] == [f"film.part{i:0{width}d}.rar" for i in range(1, count + 1)]
    sizes = [os.path.getsize(p) for p in paths]
    assert all(s <= volume_size for s in sizes) and sizes[0] == volume_size, sizes

    contents, properties = listed(paths[0])
    assert [(c["XADFileName"], c["XADFileSize"]) for c in contents] == [("Film (2026)/film.bin", size)]
    assert contents[0]["XADCompressionName"] == "None"
    assert len(properties["XADVolumes"]) == count, properties["XADVolumes"]
    assert check(paths[0]).returncode == 0, check(paths[0]).stdout
    assert extracted(paths[0], tmp_path / "out") == {"Film (2026)/film.bin": src.read_bytes()}


def test_a_member_that_fills_its_last_volume_leaves_no_empty_volume(tmp_path):
    volume_size = 100_000
    # The data of three full volumes, as the writer plans a slightly
    # larger member (its sizes' fields as wide).
    size = sum(rar5write.plan(b"m.bin", 300_000, volume_size)[:3])
    src = source(tmp_path, size, seed=3)
    paths = rar5write.write_rar5_volumes(src, "m.bin", tmp_path, "full", volume_size)
    assert [os.path.getsize(p) for p in paths] == [volume_size] * 3
    assert extracted(paths[0], tmp_path / "out") == {"m.bin": src.read_bytes()}


def test_unar_finds_a_changed_byte_so_its_checks_prove_the_crcs(tmp_path):
    src = source(tmp_path, 1 << 20, seed=4)
    paths = rar5write.write_rar5_volumes(src, "m.bin", tmp_path, "bad", 300_000)
    assert check(paths[0]).returncode == 0
    with open(paths[1], "r+b") as f:
        f.seek(150_000)
        byte = f.read(1)
        f.seek(150_000)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert check(paths[0]).returncode != 0
