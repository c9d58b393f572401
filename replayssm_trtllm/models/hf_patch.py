"""Run a Hugging Face transformers hybrid model with ReplaySSM in its SSM layers.

    from replayssm_trtllm.models import use_replay
    patch = use_replay(model, backend="replay-kernels", window=16)   # model: NemotronH / Qwen3.5 / Qwen3-Next
    out = model.generate(input_ids, max_new_tokens=64)               # attention, MLP, norms: transformers'
    patch.remove()                                                   # the model's own mixers again

Every SSM mixer module of the model (``NemotronHMamba2Mixer``, ``Qwen3_5GatedDeltaNet``,
``Qwen3NextGatedDeltaNet``) gets a forward that runs this package's decode path (``models/backends.py``) on the
module's own weights: the first forward of a generation (the prompt) goes through :meth:`SsmDecoder.prefill`,
every later one-token forward through :meth:`SsmDecoder.step`, with the commit after the model's last SSM
layer. A new generation is recognised by a new cache object (``past_key_values``); a forward without a
cache is a whole sequence on its own (state reset, prompt prefilled, nothing kept).

Speculative decoding (``max_verify`` > 1): a forward of T <= max_verify tokens after the prompt is a verify step
(output-only, Algorithms 2 / 5); the caller then keeps the first n with ``patch.accept(cache, n)``, which commits
the SSM layers by n and drops the rest from transformers' attention cache. One-token forwards commit at once, so
``generate`` still works. Batch rows are slots 0..B-1, accept the same n, and must not be padded (an attention
mask with zeros is refused); the reference backends run the recurrence in float64
on the CPU, the kernels backend on the GPU (bf16 activations, fp32 state). The transformers cache's own SSM
entries are left untouched (stale) while the patch is on, except the token count transformers 5.25 keeps in them
(the model's positions come from it), which the patch advances (earlier 5.x releases count in the attention layers).
The batch's rows start at consecutive flush phases (``admission_phase="spread"``, the decoder's default: neutral
records, no change to any output), so that they do not all flush on the same step; ``admission_phase=None`` gives
the paper's ``h = 0``.
"""
from __future__ import annotations

import functools
import weakref
from typing import Callable, Dict, List, Optional, Union

import torch

from .backends import BACKENDS, SsmDecoder, make_backend, mixer_placement
from .checkpoint import unpack_qwen3_next_projections
from .hf_config import SsmMixerSpec, parse_hf_config
from .mixers import make_mixer

MIXER_CLASSES = ("NemotronHMamba2Mixer", "Qwen3_5GatedDeltaNet", "Qwen3NextGatedDeltaNet")


def find_mixers(model) -> Dict[int, torch.nn.Module]:
    """``{model layer index: SSM mixer module}`` of a transformers hybrid model (by class name and the
    ``layers.<i>.`` part of the module's name)."""
    out = {}
    for name, mod in model.named_modules():
        if type(mod).__name__ in MIXER_CLASSES:
            parts = name.split(".")
            if "layers" not in parts:
                continue
            i = parts.index("layers")
            if "mtp" in parts[:i]:
                continue
            out[int(parts[i + 1])] = mod
    return out


class ReplayPatch:
    """The patched mixers of one model (see the module doc). Build with :func:`use_replay`."""

    def __init__(self, model, backend: str = "replay-reference", window: int = 16, max_batch: int = 8,
                 device=None, dtype: Optional[torch.dtype] = None, max_verify: int = 1,
                 act_dtype: torch.dtype = torch.bfloat16, admission_phase: Union[None, str, int] = "spread"):
        if backend not in BACKENDS:
            raise ValueError(f"use_replay: backend must be one of {BACKENDS}; got {backend!r}")
        self.spec: SsmMixerSpec = parse_hf_config(model.config.to_dict())
        mods = find_mixers(model)
        patched = [i for i, m in mods.items() if "forward" in m.__dict__]
        if patched:
            raise ValueError(f"use_replay: the mixers of layers {patched} are patched already; remove() the earlier "
                             f"patch first")
        if sorted(mods) != list(self.spec.ssm_layers):
            raise ValueError(f"use_replay: config.json's SSM layers {list(self.spec.ssm_layers)} do not match the "
                             f"model's mixer modules at layers {sorted(mods)}")
        self.device, self.dtype = mixer_placement(backend, device, dtype)
        self.max_batch = int(max_batch)
        mixers = {}
        for i, mod in mods.items():
            w = {k: v.detach() for k, v in mod.state_dict().items()}
            if self.spec.packed_projections:
                unpack_qwen3_next_projections(self.spec, w)
            mixers[i] = make_mixer(self.spec, w, self.dtype, self.device)
        self.max_verify = int(max_verify)
        if self.max_verify < 1:
            raise ValueError(f"use_replay: max_verify must be >= 1; got {max_verify}")
        self.decoder = SsmDecoder(self.spec, mixers, make_backend(backend, self.spec, self.max_batch, window,
                                                                  self.max_verify, act_dtype, self.device),
                                  admission_phase)
        self.modules = mods
        self._last = max(self.spec.ssm_layers)
        self._cache_ref: Optional[Callable[[], object]] = None  # the current generation's cache (_remember_cache)
        self._prefilled: set = set()
        self._rows: Optional[torch.Tensor] = None
        self._pending_T: Optional[int] = None     # a verify step (T > 1) waiting for accept()
        for i, mod in mods.items():
            mod.forward = self._forward_for(i)

    def remove(self) -> None:
        """Give the modules their own forward back."""
        for mod in self.modules.values():
            if "forward" in mod.__dict__:
                del mod.forward

    # ---- the patched forward ---------------------------------------------------------------------
    def _start(self, batch: int) -> None:
        if batch > self.max_batch:
            raise ValueError(f"use_replay: batch {batch} > max_batch {self.max_batch}; pass a larger max_batch")
        if self._pending_T is not None:
            self.decoder.commit(torch.full((int(self._rows.shape[0]),), 1, dtype=torch.int32))   # abandoned verify
            self._pending_T = None
        self.decoder.reset(range(self.max_batch))
        self._prefilled = set()
        self._rows = torch.arange(batch)

    def _forward_for(self, layer: int):
        def forward(hidden_states, *args, **kwargs):
            return self._forward(layer, hidden_states, args, kwargs)
        return forward

    def _forward(self, layer: int, hidden: torch.Tensor, args, kwargs):
        cache = next((kwargs[k] for k in ("cache", "cache_params", "past_key_values") if kwargs.get(k) is not None),
                     args[0] if args else None)
        mask = kwargs.get("attention_mask")
        if mask is not None and not bool(mask.all()):
            raise NotImplementedError("use_replay: padded batches (an attention mask with zeros) are not supported; "
                                      "run rows of equal length")
        B, T, _ = hidden.shape
        first = self.spec.ssm_layers[0]
        new = layer == first if cache is None else not self._same_cache(cache)
        if new:
            if layer != first:
                raise RuntimeError(f"use_replay: layer {layer} saw a new generation before layer {first}; the model "
                                   f"must call its SSM layers in order")
            self._start(B)
            self._remember_cache(cache)
        h = hidden.to(self.device, self.dtype)
        if layer not in self._prefilled:
            out = self.decoder.prefill(layer, h, self._rows)
            self._prefilled.add(layer)
        else:
            if T > self.max_verify:
                raise NotImplementedError(f"use_replay: {T} new tokens in one forward after the prompt; this patch "
                                          f"takes at most max_verify={self.max_verify} (use_replay(..., max_verify=T) "
                                          f"for verify steps, then accept())")
            if self._pending_T is not None and layer == self.spec.ssm_layers[0]:
                raise RuntimeError(f"use_replay: the last verify step ({self._pending_T} tokens) was not accepted; "
                                   f"call patch.accept(cache, n) first")
            out = self.decoder.step(layer, h, self._rows)
            if layer == self._last:
                if T == 1:
                    self.decoder.commit()
                else:
                    self._pending_T = T
        if cache is not None:
            self._count_tokens(cache, layer, T)
        return out.to(hidden.device, hidden.dtype)

    def _remember_cache(self, cache) -> None:
        """The cache of the generation just started, held weakly: a cache that transformers creates inside one
        forward and drops after it must not look like the next forward's (comparing id() did: CPython reuses the
        freed address for the next cache, and a cache-less forward then continued the previous one)."""
        if cache is None:
            self._cache_ref = None
            return
        try:
            self._cache_ref = weakref.ref(cache)
        except TypeError:  # a cache type without weak references: hold it until the next generation
            self._cache_ref = lambda: cache

    def _same_cache(self, cache) -> bool:
        ref = self._cache_ref
        return ref is not None and ref() is cache

    def accept(self, cache, n: int) -> None:
        """After a verify forward of T tokens: keep the first ``n`` (1 <= n <= T, the same for every row) and
        drop the rest. The SSM layers commit n (the device commit with the kernels backend; no state is copied
        back), transformers' attention layers drop their last T - n keys / values, and its token count
        (positions) goes back by T - n."""
        T = self._pending_T
        if T is None:
            raise RuntimeError("use_replay.accept: no verify step (a forward of more than one token after the "
                               "prompt) is waiting")
        n = int(n)
        if not 1 <= n <= T:
            raise ValueError(f"use_replay.accept: n must be in [1, {T}]; got {n}")
        B = int(self._rows.shape[0])
        self.decoder.commit(torch.full((B,), n, dtype=torch.int32))
        self._pending_T = None
        drop = T - n
        if drop == 0:
            return
        for i, lay in enumerate(getattr(cache, "layers", [])):
            count = getattr(lay, "cumulative_length_linear", None)
            if isinstance(count, torch.Tensor):       # an SSM layer's entry: only its token count is live
                count.sub_(drop)
            elif _is_linear_attention_layer(lay):     # an SSM layer's entry without a count (transformers < 5.25):
                continue                              # nothing of it is live while the patch is on
            elif hasattr(lay, "crop"):
                lay.crop(-drop)
            else:
                raise NotImplementedError(f"use_replay.accept: cache layer {i} ({type(lay).__name__}) cannot drop "
                                          f"tokens")

    @staticmethod
    def _count_tokens(cache, layer: int, T: int) -> None:
        """transformers 5.25 keeps a hybrid model's sequence length in the linear-attention cache layers (the
        model's positions come from ``cache.get_seq_length()``, i.e. layer 0, often an SSM layer), advanced by
        the mixer's own cache update, which the patch bypasses: advance it here. Earlier transformers 5 releases
        keep no count there and take the sequence length from the first attention layer, which its attention
        module advances itself: nothing to do then. Any other cache layout is refused."""
        layers = getattr(cache, "layers", None)
        lay = layers[layer] if layers is not None and layer < len(layers) else None
        count = getattr(lay, "cumulative_length_linear", None)
        if isinstance(count, torch.Tensor):
            count.add_(T)
            return
        if _is_linear_attention_layer(lay) and any(not _is_linear_attention_layer(other) for other in layers):
            return
        import transformers
        raise NotImplementedError(f"use_replay: the cache of transformers {transformers.__version__} "
                                  f"({type(cache).__name__}, layer {layer}: {type(lay).__name__}) keeps neither a "
                                  f"'cumulative_length_linear' in its SSM layers (transformers 5.25) nor the sequence "
                                  f"length in attention layers only (earlier 5.x); positions would go wrong, so the "
                                  f"patch refuses to run with it")


@functools.lru_cache(maxsize=None)
def _linear_attention_layer_class():
    """transformers 5's ``LinearAttentionCacheLayerMixin`` (looked up once), or None where it cannot be imported."""
    try:
        from transformers.cache_utils import LinearAttentionCacheLayerMixin
    except ImportError:
        return None
    return LinearAttentionCacheLayerMixin


def _is_linear_attention_layer(lay) -> bool:
    """Whether a transformers cache layer is a linear-attention (SSM) layer's entry (``LinearAttentionCacheLayerMixin``
    in transformers 5; by class name where that class cannot be imported)."""
    if lay is None:
        return False
    cls = _linear_attention_layer_class()
    return isinstance(lay, cls) if cls is not None else "LinearAttention" in type(lay).__name__


def use_replay(model, backend: str = "replay-reference", window: int = 16, max_batch: int = 8, device=None,
               dtype: Optional[torch.dtype] = None, max_verify: int = 1,
               act_dtype: torch.dtype = torch.bfloat16, admission_phase: Union[None, str, int] = "spread"
               ) -> ReplayPatch:
    """Patch ``model``'s SSM mixers to decode through ReplaySSM (module doc); returns the patch (``.remove()``).
    ``max_verify`` > 1 also takes verify forwards of up to that many tokens, each followed by
    ``patch.accept(cache, n)``. ``act_dtype``: the kernels backend's activation dtype (bf16 or fp16).
    ``admission_phase``: the replay caches' flush phase for the batch's rows (:class:`~.backends.SsmDecoder`;
    ``"spread"`` by default, so that the batch's rows, admitted together, do not all flush on one step)."""
    return ReplayPatch(model, backend, window, max_batch, device, dtype, max_verify, act_dtype, admission_phase)


__all__: List[str] = ["use_replay", "ReplayPatch", "find_mixers", "MIXER_CLASSES"]
