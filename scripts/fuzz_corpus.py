#!/usr/bin/env python3
"""Packs a fuzz corpus directory into one gzip file (an input per line, as
hex, sorted), or unpacks such a file into a directory. One small file per
target keeps thousands of inputs out of git's file list (fuzz inputs
compress about twentyfold). Usage: fuzz_corpus.py pack DIR FILE | unpack FILE DIR"""

import gzip
import hashlib
import pathlib
import sys


def pack(directory: pathlib.Path, packed: pathlib.Path) -> None:
    lines = sorted({f.read_bytes().hex() for f in directory.iterdir() if f.is_file()})
    packed.parent.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same corpus packs to the same bytes.
    packed.write_bytes(gzip.compress("".join(line + "\n" for line in lines).encode(), 9, mtime=0))


def unpack(packed: pathlib.Path, directory: pathlib.Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if not packed.exists():
        return
    for line in gzip.decompress(packed.read_bytes()).decode().splitlines():
        data = bytes.fromhex(line)
        (directory / hashlib.sha1(data).hexdigest()).write_bytes(data)


if __name__ == "__main__":
    command, source, destination = sys.argv[1:4]
    {"pack": pack, "unpack": unpack}[command](pathlib.Path(source), pathlib.Path(destination))
