"""`replayssm-trtllm error-study`: output error of low-precision checkpoints vs generation length N.

Runs the study of ``replayssm_trtllm.studies.error_study`` on a synthetic Mamba-2 and/or GDN layer, prints
progress and a markdown table, and optionally writes a log-log PNG, the markdown and the raw results (JSON).
``--jobs J`` splits the work into independent processes (per family: the windowed configurations, and each
per-step configuration), each recomputing the float64 truth; results are identical to a single process.
"""
from __future__ import annotations

import json
import sys
import time

from ..studies.error_study import (CONFIGS, FAMILIES, StudyConfig, markdown_report, merge_results, plot_results,
                                   result_from_dict, result_to_dict, run_study)


def add_arguments(p):
    p.add_argument("--family", choices=["mamba2", "gdn", "both"], default="both", help="layer family (default both)")
    p.add_argument("--max-steps", type=int, default=2048,
                   help="decode steps N after the prefill, a multiple of --window (default 2048, a few minutes on "
                        "one CPU core; docs/error-study.md: 131072)")
    p.add_argument("--window", "-L", type=int, default=16, help="replay window L (default 16)")
    p.add_argument("--heads", type=int, default=4, help="heads per layer (default 4)")
    p.add_argument("--eval-window", type=int, default=256,
                   help="trailing steps the RMS error at N is taken over (default 256)")
    p.add_argument("--first-eval", type=int, default=1024,
                   help="first N reported, then doubling up to --max-steps (default 1024)")
    p.add_argument("--prefill", type=int, default=512, help="prompt tokens processed in float64 (default 512)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rng", choices=["torch", "philox"], default="torch",
                   help="SR random words: torch generator (fast, default) or Philox4x32-10 (the kernel contract)")
    p.add_argument("--configs", default="all",
                   help="comma-separated configurations (default all): " + ", ".join(CONFIGS))
    p.add_argument("--device", default="cpu", help="torch device to decode on (default cpu)")
    p.add_argument("--decays-from", default=None, metavar="CHECKPOINT",
                   help="take the heads' decay centres from a Hugging Face checkpoint's SSM layers (neutral-input "
                        "exp(-exp(A_log) softplus(dt_bias)), spread over quantiles; studies/model_decays.py) instead "
                        "of the family's synthetic range; the family is the checkpoint's")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads per process (default 1)")
    p.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--png", default=None, help="write the log-log plot here")
    p.add_argument("--markdown", default=None, help="write the tables here")
    p.add_argument("--json", default=None, help="write the raw results here")
    p.add_argument("--load-json", nargs="+", default=None, metavar="PATH",
                   help="do not run: merge and render results saved with --json")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _say(msg: str) -> None:
    print(msg, flush=True)


def _worker(cfg_dict: dict, threads: int, quiet: bool) -> dict:
    import torch
    torch.set_num_threads(threads)
    cfg = StudyConfig(**cfg_dict)
    return result_to_dict(run_study(cfg, progress=None if quiet else _say))


def _tasks(args, families, configs, decays=None):
    base = dict(max_steps=args.max_steps, window=args.window, heads=args.heads, eval_window=args.eval_window,
                first_eval=args.first_eval,
                prefill=args.prefill, seed=args.seed, rng=args.rng, device=args.device)
    if decays is not None:
        base.update(alpha_centres=tuple(decays[0]), decay_source=decays[1])
    tasks = []
    for fam in families:
        if args.jobs <= 1:
            tasks.append({**base, "family": fam, "configs": tuple(configs)})
            continue
        windowed = tuple(c for c in configs if not CONFIGS[c].per_step)
        if windowed:
            tasks.append({**base, "family": fam, "configs": windowed})
        tasks += [{**base, "family": fam, "configs": (c,)} for c in configs if CONFIGS[c].per_step]
    return tasks


def run(args) -> int:
    if args.load_json:
        raw = []
        for path in args.load_json:
            with open(path) as f:
                raw += json.load(f)
        results = merge_results([result_from_dict(d) for d in raw])
    else:
        families = list(FAMILIES) if args.family == "both" else [args.family]
        decays = None
        if args.decays_from:
            from ..studies.model_decays import centres_from_checkpoint
            try:
                fam, centres, desc = centres_from_checkpoint(args.decays_from, args.heads)
            except (ValueError, FileNotFoundError, ImportError) as e:
                raise SystemExit(f"error-study: --decays-from: {e}") from None
            if args.family not in ("both", fam):
                raise SystemExit(f"error-study: --decays-from is a {fam} checkpoint; --family {args.family} "
                                 f"contradicts it")
            families, decays = [fam], (centres, desc)
            if not args.quiet:
                _say(f"error-study: decay centres from {desc}: {', '.join(f'{a:.4g}' for a in centres)}")
        configs = list(CONFIGS) if args.configs == "all" else [c.strip() for c in args.configs.split(",") if c.strip()]
        tasks = _tasks(args, families, configs, decays)
        for t in tasks:   # fail fast on bad settings, before any process starts
            try:
                StudyConfig(**t).validate()
            except ValueError as e:
                raise SystemExit(str(e)) from None
        t0 = time.time()
        if args.jobs <= 1:
            raw = [_worker(t, args.threads, args.quiet) for t in tasks]
        else:
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor
            with ProcessPoolExecutor(max_workers=args.jobs, mp_context=mp.get_context("spawn")) as ex:
                raw = list(ex.map(_worker, tasks, [args.threads] * len(tasks), [args.quiet] * len(tasks)))
        results = merge_results([result_from_dict(d) for d in raw])
        if not args.quiet:
            _say(f"error-study: done in {time.time() - t0:.0f} s")
        if args.json:
            with open(args.json, "w") as f:
                json.dump([result_to_dict(r) for r in results], f, indent=1)
    md = markdown_report(results)
    print(md)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(md + "\n")
    if args.png:
        plot_results(results, args.png)
        _say(f"error-study: wrote {args.png}")
    bad = sorted({f"{r.family}/{n}" for r in results for n, v in r.errors.items() if any(x != x for x in v)})
    if bad:
        _say(f"error-study: warning: non-finite error (the state diverged) for {', '.join(bad)}")
    return 0


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="replayssm-trtllm error-study", description=__doc__)
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
