#!/usr/bin/env python3
"""Compare two PTX files entry point by entry point, ignoring what a code change elsewhere in the file moves without
changing the code: debug lines (.loc / .file), register declarations, label numbers, register numbering (renamed by
first appearance) and mangled names inside bodies.

    nvcc -std=c++17 -O3 --expt-relaxed-constexpr -arch=compute_90a -I. -I../include -ptx FILE.cu -o /tmp/old.ptx
    (change the source)   ... -o /tmp/new.ptx
    python3 scripts/ptx_entry_diff.py /tmp/old.ptx /tmp/new.ptx [--map OLD=NEW ...]

--map renames a mangled-name fragment of the old file before matching entry names, e.g. when a template parameter with
a default is added: --map 'EEEv15GdnReplayParams=ELb0EEEv15GdnReplayParams'. Prints identical / changed / only-old /
only-new per entry; exit status 1 if an entry present in both files differs.
"""
from __future__ import annotations

import argparse
import re
import sys


def entries(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"\.entry\s+(\S+)\s*\((.*?)\n\}\n", text, flags=re.S):
        out[m.group(1)] = m.group(2)
    return out


def normalize(body: str) -> str:
    lines = []
    for line in body.splitlines():
        s = line.strip()
        if not s or s.startswith(".loc") or s.startswith(".file") or s.startswith(".reg") or s.startswith("//"):
            continue
        lines.append(s)
    text = "\n".join(lines)
    text = re.sub(r"_Z\w+", "MANGLED", text)
    labels: dict[str, str] = {}
    text = re.sub(r"\$L__\w+", lambda m: labels.setdefault(m.group(0), f"L{len(labels)}"), text)
    regs: dict[str, str] = {}
    text = re.sub(r"%(rd|r|f|fd|p|rs|h|hh|b)(\d+)",
                  lambda m: regs.setdefault(m.group(0), f"%{m.group(1)}_{len(regs)}"), text)
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--map", action="append", default=[], help="OLD=NEW fragment of the old entry names")
    a = ap.parse_args()
    old = entries(open(a.old).read())
    new = entries(open(a.new).read())
    for rule in a.map:
        frm, to = rule.split("=", 1)
        old = {k.replace(frm, to): v for k, v in old.items()}
    changed = 0
    for name in sorted(set(old) | set(new)):
        if name not in new:
            print(f"only-old  {name}")
        elif name not in old:
            print(f"only-new  {name}")
        elif normalize(old[name]) == normalize(new[name]):
            print(f"identical {name}")
        else:
            print(f"CHANGED   {name}")
            changed += 1
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
