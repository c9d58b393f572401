"""Which CUDA kernels a call launched (torch profiler), for the tests that check a launcher's choice of kernel
instance. Launcher switches are silent when their conditions fail, so those tests read the demangled names."""
from __future__ import annotations

import os
import re

import pytest
import torch


def cuda_kernel_names(fn):
    """(fn()'s result, the names of the CUDA kernels it launched)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}


def skip_under_sanitizer():
    if os.environ.get("RSSM_UNDER_SANITIZER"):
        pytest.skip("compute-sanitizer holds CUPTI: the profiler sees no kernels")


def _arg(x: str) -> str:
    """One template argument as written by the demangler, normalized: "(int)1" -> "1", "true" / "(bool)1" -> "1"."""
    x = re.sub(r"^\(\w+\)", "", x.strip())
    return {"true": "1", "false": "0"}.get(x, x)


def template_args(name: str, kernel: str):
    """The normalized template arguments of `kernel` in a demangled kernel name (None when the name is another
    kernel's). Arguments are split at top-level commas; defaulted trailing arguments appear as the demangler prints
    them (all of them, for the names the profiler reports)."""
    i = name.find(kernel + "<")
    if i < 0:
        return None
    j, depth, args, cur = i + len(kernel) + 1, 1, [], ""
    while j < len(name) and depth:
        ch = name[j]
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                break
        if ch == "," and depth == 1:
            args.append(cur)
            cur = ""
        else:
            cur += ch
        j += 1
    args.append(cur)
    return [_arg(a) for a in args]


def instances(names, kernel: str):
    """Template-argument lists of every launched instance of `kernel`."""
    return [a for a in (template_args(n, kernel) for n in names) if a is not None]
