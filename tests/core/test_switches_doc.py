"""docs/switches.md against the code: every RSSM_* environment variable that the kernel library, the package, setup.py,
dev.sh, scripts/ or the tests read has a row in one of its tables, and every variable a table lists is still read
somewhere (a removed switch belongs under "Removed switches", which the code must no longer read)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "switches.md"

# reads of an environment variable: C/C++ getenv / envSwitch / envDigit / envCarveout / pdlEnabled (a launch class's PDL switch), Python os.environ / os.getenv, shell ${NAME} / $NAME
_CPP = re.compile(r"(?:getenv|envSwitch|envDigit|envCarveout|pdlEnabled)\(\s*\"(RSSM_[A-Z0-9_]+)\"")
_PY = re.compile(r"(?:environ(?:\.get)?\s*[\(\[]|getenv\()\s*\"(RSSM_[A-Z0-9_]+)\"")
_SH = re.compile(r"\$\{?(RSSM_[A-Z0-9_]+)")


def _read_in_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}

    def add(names, path):
        for n in names:
            found.setdefault(n, set()).add(str(path.relative_to(ROOT)))

    for path in (ROOT / "cpp_plugins").rglob("*"):
        if path.suffix in {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc"}:
            add(_CPP.findall(path.read_text(errors="replace")), path)
    py = [ROOT / "setup.py", *(ROOT / "replayssm_trtllm").rglob("*.py"), *(ROOT / "tests").rglob("*.py"),
          *(ROOT / "scripts").glob("*.py")]
    for path in py:
        if path.resolve() != Path(__file__).resolve():
            add(_PY.findall(path.read_text(errors="replace")), path)
    for path in [ROOT / "dev.sh", *(ROOT / "scripts").glob("*.sh")]:
        text = "\n".join(line for line in path.read_text(errors="replace").splitlines()
                         if not line.lstrip().startswith("#"))  # comments mention switches without reading them
        add(_SH.findall(text), path)
    return found


def _documented() -> tuple[set[str], set[str]]:
    """(variables in the tables' first column, variables named under "Removed switches")."""
    text = DOC.read_text()
    head, _, removed = text.partition("## Removed switches")
    tables = set(re.findall(r"^\| `(RSSM_[A-Z0-9_]+)`", head, flags=re.M))
    return tables, set(re.findall(r"`(RSSM_[A-Z0-9_]+)`", removed))


def test_scan_finds_the_known_reads():
    """The scan itself works: a few reads known to exist in each language are found."""
    code = _read_in_code()
    for name in ("RSSM_PDL", "RSSM_MAMBA2_MMA_ZPF", "RSSM_KERNEL_LIB", "RSSM_VENV", "RSSM_BUILD_KERNELS"):
        assert name in code, f"{name} not found by the scan"


def test_every_variable_read_is_documented():
    code = _read_in_code()
    tables, _ = _documented()
    missing = {n: sorted(p) for n, p in code.items() if n not in tables}
    assert not missing, f"read in the code but without a row in docs/switches.md: {missing}"


def test_every_documented_variable_is_read():
    code = _read_in_code()
    tables, removed = _documented()
    stale = sorted(tables - set(code))
    assert not stale, f"docs/switches.md lists variables that nothing reads (move them to 'Removed switches'): {stale}"
    revived = sorted(removed & set(code))
    assert not revived, f"listed as removed in docs/switches.md but read in the code: {revived}"
