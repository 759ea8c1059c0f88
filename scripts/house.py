#!/usr/bin/env python3
"""The house rules a compiler does not check, checked from the source tree
(issue 53): each prints what it measured; a rule marked `kept` fails the run
when broken, one marked `goal` (not met yet) is printed and does not.

    scripts/house.py          # from the repository's root
"""

import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_LEVEL_TYPE = re.compile(
    r"^(?:(?:public|package|internal|private|fileprivate|final|indirect)\s+|@\w+(?:\([^)]*\))?\s+)*"
    r"(?:class|struct|enum|protocol|typealias|actor)\s+(\w+)", re.M)
LOWER_MODULES = ["MediaSupport", "MediaStore", "MediaNetwork", "MediaSources", "MediaSegmented"]


def path(*parts):
    return os.path.join(ROOT, *parts)


def swift_files(folder, recursive=False):
    if recursive:
        return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".swift"))
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".swift"))


def code(file):
    """A Swift file without its comments and string literals' contents."""
    text = open(file, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def folder_edges(module):
    """Folder -> folder -> the top-level types of the second named in the first."""
    base = path("Sources", module)
    # A folder's subfolders (Loader/State, Loader/Plans) are part of it.
    folders = {d: swift_files(os.path.join(base, d), recursive=True) for d in sorted(os.listdir(base))
               if os.path.isdir(os.path.join(base, d))}
    owner = {}
    for folder, files in folders.items():
        for file in files:
            for name in TOP_LEVEL_TYPE.findall(code(file)):
                owner.setdefault(name, folder)
    edges = collections.defaultdict(lambda: collections.defaultdict(set))
    for folder, files in folders.items():
        for file in files:
            for word in set(re.findall(r"\b[A-Z]\w*\b", code(file))):
                other = owner.get(word)
                if other and other != folder:
                    edges[folder][other].add(word)
    return edges


def cycles(edges):
    """Each cycle among the folders, as a list of folders."""
    found, seen = [], set()

    def walk(node, trail):
        for nxt in sorted(edges.get(node, {})):
            if nxt in trail:
                cycle = trail[trail.index(nxt):]
                key = frozenset(cycle)
                if key not in seen:
                    seen.add(key)
                    found.append(cycle + [nxt])
            else:
                walk(nxt, trail + [nxt])

    for start in sorted(edges):
        walk(start, [start])
    return found


def check_no_cycles():
    edges = folder_edges("MediaCache")
    found = cycles(edges)
    arrows = "; ".join(f"{a} -> {', '.join(sorted(edges[a]))}" for a in sorted(edges))
    detail = " | ".join(" -> ".join(c) + " (" + ", ".join(sorted(edges[c[0]][c[1]])) + ")" for c in found)
    return not found, f"MediaCache's folders: {arrows}" + (f"; cycles: {detail}" if found else "")


def check_catalog_state_fields():
    text = code(path("Sources/MediaCache/Catalog/CatalogState.swift"))
    body = text[text.index("struct CatalogState"):]
    # The struct's own stored properties: four spaces in, not nested types',
    # and not computed ones (`var name: Type {`).
    open_fields = [m.group(1) for m in re.finditer(r"^    var (\w+)\b[^{\n]*$", body, re.M)]
    return not open_fields, (f"CatalogState fields writable from outside: {open_fields}" if open_fields
                             else "no CatalogState field is writable from outside it")


def check_dirty_only_in_loader_state():
    writers = []
    for file in swift_files(path("Sources/MediaCache"), recursive=True):
        if file.endswith("/LoaderState.swift"):
            continue
        for number, line in enumerate(code(file).splitlines(), 1):
            if re.search(r"\bdirty\s*=[^=]", line):
                writers.append(f"{os.path.relpath(file, ROOT)}:{number}")
    return not writers, ("`dirty` set only in LoaderState.swift" if not writers
                         else f"`dirty` set outside LoaderState: {writers}")


def check_claim_in_one_place():
    callers = [os.path.relpath(f, ROOT) for f in swift_files(path("Sources/MediaCache"), recursive=True)
               if not f.endswith(("/LoaderState.swift", "/CachedBytes.swift")) and "bytes.claim(" in code(f)]
    return not callers, ("written bytes are claimed only through LoaderState.claim(written:)" if not callers
                         else f"CachedBytes.claim called from {callers}")


def check_thin_open(limit=20):
    lines = open(path("Sources/MediaFS/Operations.swift"), encoding="utf-8").read().splitlines()
    start = next(i for i, line in enumerate(lines) if "ops.open = {" in line)
    end = next(i for i in range(start, len(lines)) if lines[i] == "    }")
    count = end - start + 1
    return count <= limit, f"ops.open is {count} lines (at most {limit})"


def check_no_reexports():
    found = [os.path.relpath(f, ROOT) for f in swift_files(path("Sources"), recursive=True)
             if "@_exported" in code(f)]
    return not found, f"modules re-exported: {found or 'none'}"


def check_test_targets(least=6):
    package = open(path("Package.swift"), encoding="utf-8").read()
    count = len(re.findall(r"\.testTarget\(", package))
    return count >= least, f"{count} test targets (at least {least})"


def check_test_imports():
    """Each test target's files import only modules its target depends on."""
    package = open(path("Package.swift"), encoding="utf-8").read()
    strays = []
    for name, deps in re.findall(r'\.testTarget\(name: "(\w+)", dependencies: \[([^\]]*)\]', package):
        allowed = set(re.findall(r'"(\w+)"', deps))
        for file in swift_files(path("Tests", name), recursive=True):
            for module in re.findall(r"^(?:@testable )?import (Media\w*|CFuse)$", open(file, encoding="utf-8").read(), re.M):
                if module not in allowed:
                    strays.append(f"{os.path.relpath(file, ROOT)} imports {module}")
    return not strays, (f"test files importing beyond their target: {strays}" if strays
                        else "every test file imports only what its target depends on")


def check_public_below_core(most=450):
    counts = {}
    for module in LOWER_MODULES:
        counts[module] = sum(len(re.findall(r"^\s*(?:@\w+\s+)*public\b", code(f), re.M))
                             for f in swift_files(path("Sources", module), recursive=True))
    total = sum(counts.values())
    return total <= most, f"{total} public declarations below MediaCache (at most {most}): {counts}"


def check_bench_runner(most=600):
    run = path("bench/run.py")
    count = len(open(run, encoding="utf-8").read().splitlines())
    importers = [f for f in sorted(os.listdir(path("bench"))) if f.endswith(".py") and
                 re.search(r"^\s*(?:import run\b|from run import)", open(path("bench", f), encoding="utf-8").read(), re.M)]
    return count <= most and not importers, (f"bench/run.py is {count} lines (at most {most}); "
                                             f"modules importing it: {importers or 'none'}")


def check_decision_status():
    folder = path("docs/decisions")
    missing = [f for f in sorted(os.listdir(folder)) if re.match(r"\d{4}-.*\.md$", f)
               and not re.search(r"^Status: ", open(os.path.join(folder, f), encoding="utf-8").read(), re.M)]
    return not missing, (f"decisions without a Status line: {missing}" if missing
                         else "every decision has a Status line")


def check_folder_sizes(most=20):
    big = []
    for directory, _, files in os.walk(path("Sources")):
        count = sum(f.endswith(".swift") for f in files)
        if count > most:
            big.append(f"{os.path.relpath(directory, ROOT)} ({count})")
    return not big, f"source folders over {most} files: {big or 'none'}"


def check_architecture_length(most=500):
    count = len(open(path("docs/architecture.md"), encoding="utf-8").read().splitlines())
    return count <= most, f"docs/architecture.md is {count} lines (at most {most})"


# (name, check, kept): a kept rule fails the run when broken.
RULES = [
    ("no cycle among MediaCache's folders", check_no_cycles, True),
    ("CatalogState's fields are its own", check_catalog_state_fields, True),
    ("dirty only in LoaderState", check_dirty_only_in_loader_state, True),
    ("the claim rule in one place", check_claim_in_one_place, True),
    ("a thin ops.open", check_thin_open, True),
    ("every decision has a status", check_decision_status, True),
    ("bench/run.py a runner", check_bench_runner, True),
    ("docs/architecture.md at most 500 lines", check_architecture_length, True),
    ("no module re-exports another", check_no_reexports, True),
    ("a test target per library", check_test_targets, True),
    ("tests import only their target's modules", check_test_imports, True),
    ("narrow layers", check_public_below_core, True),
    ("no source folder over 20 files", check_folder_sizes, True),
]


def main():
    broken = 0
    for name, check, kept in RULES:
        ok, said = check()
        mark = "ok  " if ok else ("FAIL" if kept else "goal")
        print(f"house: {mark} {name}: {said}")
        broken += kept and not ok
    if broken:
        print(f"house: {broken} kept rule(s) broken", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
