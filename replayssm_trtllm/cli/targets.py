"""`replayssm-trtllm targets`: the issue targets recorded by the benchmarks (`bench/results/latest-<family>.json`),
met or missed, and for the speculative verify targets how far each miss is from what the step's bytes allow.

The benchmarks record, per verify target, the step's achieved fraction of copy bandwidth (`copy_frac`) and the ratio
the step would have at the conventional kernel's own efficiency (`ratio_at_equal_efficiency`, from the bytes each
step moves: replayssm_trtllm/bench/step_traffic.py). From those this prints, for each time-ratio target (lower is
better), the fraction of copy bandwidth the replay step would need to reach its goal, next to the conventional
kernel's; for each per-draft speedup target (higher is better), its value at equal efficiency. A target whose goal
lies beyond its equal-efficiency value needs the replay step to move its bytes faster than the conventional kernel
moves its own: that is stated, not hidden. Under each file it also says whether the kernel sources
(cpp_plugins/kernels) changed between the record's commit and the checkout's HEAD (git; comment-only changes count),
i.e. whether the record still times this checkout's kernels. No GPU: it reads recorded results only.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from replayssm_trtllm.bench.common import target_value_text

FAMILIES = ("mamba2", "gdn", "precision")
DEFAULT_RESULTS = Path("bench/results")


class TargetsError(ValueError):
    """A results file that cannot be read as a benchmark result (names the file and what was wrong)."""


@dataclass(frozen=True)
class TargetRow:
    family: str
    name: str
    value: Optional[float]    # None: the case did not run (recorded as None / NaN)
    goal: float
    direction: str            # "<=" lower is better, ">=" higher is better, "=" value == goal, "?" no value
    met: bool
    case: str
    copy_frac: Optional[float] = None          # the replay step's achieved fraction of copy bandwidth
    conventional_frac: Optional[float] = None  # the conventional kernel's, implied by the recorded bound
    at_equal_efficiency: Optional[float] = None
    needed_frac: Optional[float] = None        # replay step's fraction of copy that would reach the goal

    @property
    def beyond_equal_efficiency(self) -> Optional[bool]:
        """True when the goal is not reached even at the conventional kernel's efficiency (None: not a verify or
        per-draft target, or nothing recorded)."""
        if self.at_equal_efficiency is None or self.value is None:
            return None
        if self.direction == "<=":
            return self.at_equal_efficiency > self.goal
        if self.direction == ">=":
            return self.at_equal_efficiency < self.goal
        return False


def _goal(raw, value: Optional[float], met: bool, where: str):
    """(goal, direction). Goals are numbers or strings '<= x' / '>= x'; for a bare number the direction is the one
    that agrees with the recorded `met` flag ("?" when the value is missing: the benchmarks record None / NaN for a
    case that did not run, never met)."""
    if isinstance(raw, str):
        s = raw.strip()
        for op in ("<=", ">="):
            if s.startswith(op):
                try:
                    return float(s[len(op):]), op
                except ValueError:
                    break
        try:
            raw = float(s)
        except ValueError:
            raise TargetsError(f"{where}: goal must be a number or '<= x' / '>= x'; got {raw!r}") from None
    if not isinstance(raw, (int, float)) or isinstance(raw, bool):
        raise TargetsError(f"{where}: goal must be a number or '<= x' / '>= x'; got {raw!r}")
    goal = float(raw)
    if value is None:
        return goal, "?"
    if value == goal:
        return goal, "="
    if (value < goal) == met:
        return goal, "<="
    return goal, ">="


def _number(entry: dict, key: str, where: str) -> Optional[float]:
    if key not in entry or entry[key] is None:
        return None
    v = entry[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TargetsError(f"{where}: {key} must be a number; got {v!r}")
    return float(v)


def rows_from_result(result: dict, family: str, source: str = "<result>") -> list:
    """One TargetRow per entry of the result's `targets` object."""
    targets = result.get("targets")
    if not isinstance(targets, dict) or not targets:
        raise TargetsError(f"{source}: expected a non-empty 'targets' object; got {type(targets).__name__}")
    rows = []
    for name, entry in targets.items():
        where = f"{source}: target {name!r}"
        if not isinstance(entry, dict):
            raise TargetsError(f"{where}: expected an object with value, goal, met; got {entry!r}")
        missing = [k for k in ("value", "goal", "met") if k not in entry]
        if missing:
            raise TargetsError(f"{where}: missing {', '.join(missing)}")
        value = _number(entry, "value", where)
        if value is not None and math.isnan(value):
            value = None  # a case that did not run (bench/common.py Target: never met)
        met = entry["met"]
        if not isinstance(met, bool):
            raise TargetsError(f"{where}: met must be true or false; got {met!r}")
        if value is None and met:
            raise TargetsError(f"{where}: met is true but the value is missing")
        goal, direction = _goal(entry["goal"], value, met, where)
        copy_frac = _number(entry, "copy_frac", where)
        ratio_eq = _number(entry, "ratio_at_equal_efficiency", where)
        value_eq = _number(entry, "value_at_equal_efficiency", where)
        conventional = needed = None
        at_eq = ratio_eq if ratio_eq is not None else value_eq
        if value is not None and ratio_eq is not None and copy_frac is not None and ratio_eq > 0:
            # time ratio = bytes ratio / efficiency ratio, so value * copy_frac = ratio_eq * conventional_frac
            conventional = value * copy_frac / ratio_eq
            if goal > 0:
                needed = copy_frac * value / goal
        rows.append(TargetRow(family=family, name=name, value=value, goal=goal, direction=direction, met=met,
                              case=str(entry.get("case", "")), copy_frac=copy_frac, conventional_frac=conventional,
                              at_equal_efficiency=at_eq, needed_frac=needed))
    return rows


def load_result(path: Path) -> dict:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise TargetsError(f"{path}: no such results file (the benchmarks write bench/results/latest-<family>.json; "
                           f"run `replayssm-trtllm bench <family>` on a GPU)") from None
    try:
        result = json.loads(text)
    except json.JSONDecodeError as e:
        raise TargetsError(f"{path}: not JSON ({e})") from None
    if not isinstance(result, dict):
        raise TargetsError(f"{path}: expected a JSON object; got {type(result).__name__}")
    return result


def _pct(x: Optional[float]) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def _num(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.3f}"


def format_table(rows: list) -> str:
    head = ["target", "value", "goal", "met", "step % of copy", "needed % of copy", "conventional % of copy",
            "at equal efficiency", "beyond equal efficiency"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        beyond = r.beyond_equal_efficiency
        lines.append("| " + " | ".join([
            r.name, "not run" if r.value is None else target_value_text(r.value, r.goal, r.met),
            f"{r.direction} {r.goal:g}",
            "met" if r.met else "**missed**", _pct(r.copy_frac),
            _pct(r.needed_frac), _pct(r.conventional_frac), _num(r.at_equal_efficiency),
            "" if beyond is None else ("yes" if beyond else "no")]) + " |")
    return "\n".join(lines)


def summary_line(family: str, rows: list, result: dict) -> str:
    met = sum(r.met for r in rows)
    missed = [r for r in rows if not r.met]
    beyond = [r for r in missed if r.beyond_equal_efficiency]
    text = (f"{family}: {met} of {len(rows)} met ({result.get('gpu', '?')}, commit {result.get('git_commit', '?')}, "
            f"{result.get('date', '?')})")
    if result.get("complete") is False:  # the benches write after every block; a run cut short says so here
        text += ("; INCOMPLETE: the run stopped before its last case, so targets of the cases it did not reach are "
                 "absent")
    if beyond:
        text += (f"; {len(beyond)} of the {len(missed)} missed lie beyond the conventional kernel's efficiency "
                 f"(the replay step would have to move its bytes faster than the conventional kernel moves its own)")
    return text


def settle_note(result: dict) -> str:
    """How the run's timed groups waited after large allocations and frees (the benches' ``settle`` summary, since
    the seventieth session; the precision bench keeps it under ``extra``): whether a reader can compare the record
    with one taken before the waits existed."""
    st = result.get("settle")
    if st is None and isinstance(result.get("extra"), dict):
        st = result["extra"].get("settle")
    if not isinstance(st, dict):
        return ("timing settle: not recorded (a run from before the seventieth session: timed groups did not wait "
                "for the bandwidth to recover after large allocations and frees)")
    if not st.get("max_seconds"):
        return "timing settle: off (--settle-seconds 0)"
    reported = [e for e in st.get("reported") or [] if isinstance(e, dict)]
    text = f"timing settle: {st.get('waits', '?')} waits, {len(reported)} over 50 ms"
    if reported:
        longest = max(reported, key=lambda e: e.get("waited_s") or 0)
        text += f" (longest {longest.get('waited_s')} s before {longest.get('what')!r})"
        unsettled = sum(1 for e in reported if e.get("settled") is False)
        if unsettled:
            text += f"; {unsettled} timed without the probe back at {st.get('fraction', 0.97):.0%} of its best"
    return text


KERNEL_SOURCES = "cpp_plugins/kernels"


def _git(args: list, cwd) -> Optional[subprocess.CompletedProcess]:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


def kernel_sources_note(commit, where=".", most: int = 4) -> str:
    """Whether the kernel sources (cpp_plugins/kernels) changed between a record's commit and the checkout's HEAD, so
    that a reader knows if the record still times the checkout's kernels. "" outside a git checkout or for a commit
    that is not a hash; says so when the checkout does not hold the commit. A suffix such as "+dirty" is dropped (the
    record then timed uncommitted changes on top of that commit, which is said too)."""
    if not isinstance(commit, str):
        return ""
    m = re.fullmatch(r"\s*([0-9a-fA-F]{7,40})(\S*)\s*", commit)
    if not m:
        return ""
    c, suffix = m.group(1), m.group(2)
    top = _git(["rev-parse", "--show-toplevel"], where)
    if top is None or top.returncode != 0:
        return ""
    root = top.stdout.strip()
    extra = f" (the record says {commit.strip()}: changes on top of it)" if suffix else ""
    known = _git(["cat-file", "-e", f"{c}^{{commit}}"], root)
    if known is None or known.returncode != 0:
        return f"kernel sources since {c}: unknown (this checkout does not hold that commit){extra}"
    diff = _git(["diff", "--name-only", c, "HEAD", "--", KERNEL_SOURCES], root)
    if diff is None or diff.returncode != 0:
        return ""
    files = [line for line in diff.stdout.splitlines() if line.strip()]
    if not files:
        return f"kernel sources ({KERNEL_SOURCES}) unchanged from {c} to HEAD{extra}"
    shown = ", ".join(f[len(KERNEL_SOURCES) + 1:] for f in files[:most]) + (", ..." if len(files) > most else "")
    return f"kernel sources ({KERNEL_SOURCES}) changed from {c} to HEAD in {len(files)} file(s): {shown}{extra}"


def add_arguments(p):
    p.add_argument("files", nargs="*", metavar="RESULT_JSON",
                   help="benchmark results (default: bench/results/latest-{mamba2,gdn,precision}.json, those present)")
    p.add_argument("--missed", action="store_true", help="list only the missed targets")
    p.add_argument("--summary", action="store_true",
                   help="one line per file: met of total, the run's GPU, commit and date (scripts/gpu_run.sh)")


def run(args) -> int:
    files = [Path(f) for f in args.files]
    if not files:
        files = [DEFAULT_RESULTS / f"latest-{fam}.json" for fam in FAMILIES]
        files = [f for f in files if f.exists()]
        if not files:
            raise SystemExit(f"targets: no bench/results/latest-*.json under {Path.cwd()}; pass result files "
                             f"explicitly or run from the repository root")
    for f in files:
        try:
            result = load_result(f)
            family = str(result.get("family") or f.stem.replace("latest-", ""))
            rows = rows_from_result(result, family, source=str(f))
        except TargetsError as e:
            raise SystemExit(f"targets: {e}") from None
        if args.summary:
            print(summary_line(family, rows, result))
            continue
        print(f"## {f}")
        print(summary_line(family, rows, result))
        if result.get("command"):
            print(f"command: {result['command']}")
        note = kernel_sources_note(result.get("git_commit"))
        if note:
            print(note)
        print(settle_note(result))
        shown = [r for r in rows if not r.met] if args.missed else rows
        print(format_table(shown) if shown else "(no missed targets)")
        print()
    return 0
