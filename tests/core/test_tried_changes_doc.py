"""docs/tried-changes.md indexes the kernel logs: every figure it quotes must appear in the log it indexes (or in
docs/benchmarks.md, where later sessions record side-by-side runs), so that the index cannot drift into figures no
measurement produced."""
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _sections():
    text = (DOCS / "tried-changes.md").read_text()
    m2 = text.index("## Mamba-2 (docs/kernels-mamba2.md)")
    gdn = text.index("## Gated DeltaNet (docs/kernels-gdn.md)")
    return {"kernels-mamba2.md": text[m2:gdn], "kernels-gdn.md": text[gdn:]}


def test_every_figure_of_the_index_is_in_its_sources():
    bench = (DOCS / "benchmarks.md").read_text()
    for log, section in _sections().items():
        sources = (DOCS / log).read_text() + bench
        figures = set(re.findall(r"\d+\.\d+", section))
        assert len(figures) > 100, f"{log}: the index section lost its tables ({len(figures)} figures)"
        missing = sorted(f for f in figures if f not in sources)
        assert not missing, f"docs/tried-changes.md ({log} section) quotes figures found in neither docs/{log} " \
                            f"nor docs/benchmarks.md: {missing}"


def test_the_kernel_logs_point_at_the_index():
    for log in ("kernels-mamba2.md", "kernels-gdn.md"):
        head = (DOCS / log).read_text()[:600]
        assert "docs/tried-changes.md" in head, f"docs/{log} no longer points at docs/tried-changes.md near its top"
