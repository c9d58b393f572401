"""Hugging Face hybrid models on ReplaySSM: config parsing, checkpoint loading, decode-time mixers.

- :mod:`.hf_config`: ``config.json`` of Nemotron-H / Nemotron-3, Qwen3.5 and Qwen3-Next -> :class:`SsmMixerSpec`.
- :mod:`.checkpoint`: the SSM mixer tensors of a safetensors checkpoint (``safetensors`` package).
- :mod:`.mixers`: the mixers' arithmetic around the recurrence, as the Hugging Face models compute it.
- :mod:`.backends`: conventional / ReplaySSM float64 references and the CUDA kernels, and :class:`SsmDecoder`.
- :mod:`.tensor_parallel`: a rank's heads and tensor slices under tensor parallelism, and the ranks emulated in
  one process.

``load_ssm_decoder(path, backend=...)`` builds the whole decode path of a checkpoint in one call.
"""
from .backends import ConventionalReference, ReplayKernels, ReplayReference, RequestStates, SsmDecoder
from .checkpoint import (HfCheckpoint, HfCheckpointError, load_mixer_weights, mixer_tensor_problems,
                         mixer_weight_shapes)
from .hf_config import (GDN, MAMBA2, SUPPORTED_MODEL_TYPES, HfConfigError, SsmMixerSpec, load_hf_config,
                        parse_hf_config)
from .mixers import CausalConvState, GatedDeltaNetMixer, Mamba2Mixer, make_mixer
from .loader import load_ssm_decoder
from .compare import decode_side_by_side
from .hf_patch import ReplayPatch, find_mixers, use_replay
from .tensor_parallel import (TensorParallelDecoder, gather_mixer_weights, rank_preset, rank_spec,
                              shard_mixer_weights, split_problems, tensor_parallel_problems)

__all__ = ["ConventionalReference", "ReplayKernels", "ReplayReference", "RequestStates", "SsmDecoder", "HfCheckpoint",
           "HfCheckpointError", "load_mixer_weights", "mixer_tensor_problems", "mixer_weight_shapes", "GDN", "MAMBA2",
           "SUPPORTED_MODEL_TYPES", "HfConfigError", "SsmMixerSpec", "load_hf_config", "parse_hf_config",
           "CausalConvState", "GatedDeltaNetMixer", "Mamba2Mixer", "make_mixer", "load_ssm_decoder", "ReplayPatch",
           "find_mixers", "use_replay", "decode_side_by_side", "TensorParallelDecoder", "gather_mixer_weights",
           "rank_preset", "rank_spec", "shard_mixer_weights", "split_problems", "tensor_parallel_problems"]
