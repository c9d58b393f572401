"""One call from a checkpoint directory to a ready :class:`~.backends.SsmDecoder`."""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

import torch

from .backends import BACKENDS, SsmDecoder, make_backend, mixer_placement
from .checkpoint import HfCheckpoint, load_mixer_weights
from .hf_config import load_hf_config
from .mixers import make_mixer
from .tensor_parallel import check_split, rank_spec, shard_mixer_weights


def load_ssm_decoder(path: Union[str, os.PathLike], backend: str = "replay-reference", num_slots: int = 1,
                     window: int = 16, max_verify: int = 1,
                     layers: Optional[Sequence[int]] = None, device=None,
                     dtype: Optional[torch.dtype] = None,
                     admission_phase: Union[None, str, int] = "spread", tp_size: int = 1,
                     tp_rank: int = 0) -> SsmDecoder:
    """The SSM decode path of the checkpoint at ``path`` (config.json + safetensors), or of one
    tensor-parallel rank of it.

    Args:
        backend: ``"replay-reference"`` (float64 ReplaySSM, CPU), ``"conventional-reference"`` (float64
            conventional, CPU) or ``"replay-kernels"`` (CUDA kernels, bf16 activations, fp32 state).
        num_slots / window / max_verify: the replay cache; ``max_verify`` > 1 is speculative mode (the window
            is ignored by the conventional backend).
        layers: restrict to these SSM layers (model indices); default all.
        device / dtype: where and in what the mixers' projections run; default CPU float64 for the
            references and CUDA float32 for the kernels.
        admission_phase: the replay caches' flush phase for admitted rows (:class:`~.backends.SsmDecoder`;
            ``"spread"`` by default, None for the paper's ``h = 0``).
        tp_size / tp_rank: tensor parallelism (:mod:`.tensor_parallel`): the decoder of rank ``tp_rank`` of
            ``tp_size``, over its heads only (its spec is ``rank_spec(spec, tp_size)``, its replay cache holds
            1 / tp_size of the state); the ranks' outputs summed are the model's. Each layer's full tensors are
            read and sliced.
    """
    if backend not in BACKENDS:
        raise ValueError(f"load_ssm_decoder: backend must be one of {BACKENDS}; got {backend!r}")
    spec = load_hf_config(path)
    if layers is not None:
        bad = [i for i in layers if i not in spec.ssm_layers]
        if bad:
            raise ValueError(f"load_ssm_decoder: layers {bad} are not SSM layers; SSM layers: {list(spec.ssm_layers)}")
        from dataclasses import replace
        spec = replace(spec, ssm_layers=tuple(layers))
    full = spec
    check_split(full, tp_size, tp_rank, who="load_ssm_decoder")   # before any tensor is read
    spec = rank_spec(full, tp_size)
    device, dtype = mixer_placement(backend, device, dtype)
    ckpt = HfCheckpoint(path)

    def weights(i):
        w = load_mixer_weights(ckpt, full, i)
        return w if tp_size == 1 else shard_mixer_weights(full, w, tp_size, tp_rank)

    mixers = {i: make_mixer(spec, weights(i), dtype, device) for i in spec.ssm_layers}
    return SsmDecoder(spec, mixers, make_backend(backend, spec, num_slots, window, max_verify, device=device),
                      admission_phase)
