"""ReplaySSM behind other libraries' calling conventions (docs/pytorch-backend.md).

- :class:`~.selective_state_update.ReplaySelectiveStateUpdate`: a drop-in for
  ``flashinfer.mamba.selective_state_update`` (Mamba-2 standard decode), e.g. as TensorRT-LLM's PyTorch-backend
  ``Mamba2Mixer.selective_state_update_func``.
- :class:`~.gated_delta_rule_update.ReplayGatedDeltaRuleUpdate`: a drop-in for the fla-derived
  ``fused_sigmoid_gating_delta_rule_update`` (Gated DeltaNet standard decode).
"""
from .gated_delta_rule_update import ReplayGatedDeltaRuleUpdate
from .selective_state_update import ReplaySelectiveStateUpdate

__all__ = ["ReplayGatedDeltaRuleUpdate", "ReplaySelectiveStateUpdate"]
