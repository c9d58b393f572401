"""The FlashInfer peer follows our kernels' launch mode: with RSSM_PDL_CHAIN=1 (our step kernels launched as
programmatic dependents) it asks checkpointing_ssu for enable_pdl=True, otherwise not, so that a side-by-side run gives
both the same launch overlap (CPU only: the switch's parsing, no FlashInfer needed)."""
from replayssm_trtllm.bench import peers


def test_pdl_chain_requested_follows_the_switch(monkeypatch):
    monkeypatch.delenv("RSSM_PDL_CHAIN", raising=False)
    assert peers.pdl_chain_requested() is False
    monkeypatch.setenv("RSSM_PDL_CHAIN", "1")
    assert peers.pdl_chain_requested() is True
    for v in ("0", "", "yes", "true"):
        monkeypatch.setenv("RSSM_PDL_CHAIN", v)
        assert peers.pdl_chain_requested() is False, v
