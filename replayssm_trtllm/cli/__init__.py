"""`replayssm-trtllm` command line: check, traffic, error-study, kernels, checkpoint, targets, bench."""
from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> (module, help). Modules expose add_arguments(parser) and run(args) -> int and are
# imported only when their subcommand runs (bench modules need a GPU and optional peers).
SUBCOMMANDS = {
    "check": ("replayssm_trtllm.cli.check",
              "decode a small Mamba-2 and GDN layer conventionally and with ReplaySSM (float64, CPU) "
              "and compare"),
    "traffic": ("replayssm_trtllm.cli.traffic",
                "memory-traffic model (paper App. C, Eq. 13/15/16) and the recommended window L*"),
    "error-study": ("replayssm_trtllm.cli.error_study",
                    "low-precision checkpoint error vs sequence length (PNG + table)"),
    "kernels": ("replayssm_trtllm.cli.kernels",
                "which kernel the automatic design runs per batch and tokens per step, and its workspace "
                "(host queries of the kernel library; no GPU)"),
    "checkpoint": ("replayssm_trtllm.cli.checkpoint",
                   "read a Hugging Face checkpoint: SSM layers, tensors, replay cache per slot, and optionally "
                   "decode with ReplaySSM against conventional decoding (float64, CPU)"),
    "targets": ("replayssm_trtllm.cli.targets",
                "the issue targets recorded by the benchmarks (bench/results/latest-*.json): met or missed, and how "
                "far each verify miss is from what its bytes allow (no GPU)"),
}
BENCHES = {
    "mamba2": "replayssm_trtllm.bench.mamba2",
    "gdn": "replayssm_trtllm.bench.gdn",
    "precision": "replayssm_trtllm.bench.precision",
}


def _load(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            raise SystemExit(f"replayssm-trtllm: {module} is not part of this installation") from None
        raise


def build_parser(load_modules: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="replayssm-trtllm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if load_modules:
            _load(module).add_arguments(p)
        p.set_defaults(_module=module)
    bench = sub.add_parser("bench", help="side-by-side GPU benchmarks (see docs/benchmarks.md)")
    bsub = bench.add_subparsers(dest="bench", required=True)
    for name, module in BENCHES.items():
        p = bsub.add_parser(name, help=f"benchmark the {name} kernels against the baselines")
        p.set_defaults(_module=module, _lazy_bench=True)
    return parser


def join_negative_lists(argv):
    """`--opt -1,6` -> `--opt=-1,6`: argparse takes a value that starts with '-' for an option unless it is a plain
    negative number, so a comma list led by a negative entry (the benches' `--variants -1,6`: -1 is the library's
    automatic choice) would fail with "expected one argument". No option name starts with a dash and a digit."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if (a.startswith("--") and "=" not in a and i + 1 < len(argv) and len(argv[i + 1]) > 1
                and argv[i + 1][0] == "-" and argv[i + 1][1].isdigit()):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def main(argv=None) -> int:
    argv = join_negative_lists(list(sys.argv[1:] if argv is None else argv))
    # Parse the subcommand first so only the modules it needs are imported.
    if len(argv) >= 2 and argv[0] == "bench" and argv[1] in BENCHES:
        mod = _load(BENCHES[argv[1]])
        p = argparse.ArgumentParser(prog=f"replayssm-trtllm bench {argv[1]}")
        mod.add_arguments(p)
        return int(mod.run(p.parse_args(argv[2:])) or 0)
    if argv and argv[0] in SUBCOMMANDS:
        mod = _load(SUBCOMMANDS[argv[0]][0])
        p = argparse.ArgumentParser(prog=f"replayssm-trtllm {argv[0]}",
                                    description=SUBCOMMANDS[argv[0]][1])
        mod.add_arguments(p)
        return int(mod.run(p.parse_args(argv[1:])) or 0)
    build_parser(load_modules=False).parse_args(argv)  # prints usage / errors
    return 2


if __name__ == "__main__":
    sys.exit(main())
