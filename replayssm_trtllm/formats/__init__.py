"""Checkpoint state formats with exact encode / decode (the bit-level contract of docs/formats.md).

Formats: 'fp32', 'fp16', 'bf16', 'fp8_e4m3' (e4m3fn, one fp32 scale per 128 elements along the last
dim), 'nvfp4' (e2m1 packed two per byte, one e4m3 scale per 16 elements along the last dim, one fp32
scale per [d_v, d_k] state). Rounding: 'rtn' (nearest, ties to even) or 'sr' (stochastic, Philox4x32-10
words keyed by (seed, slot, layer, flush_index, element)).

    enc = encode(x, "nvfp4", rounding="sr", key=PhiloxKey(seed, slot, layer, flush_index))
    y = decode(enc)                      # float32, x's shape
    y = quantize_dequantize(x, "fp8_e4m3")
"""
from .codec import (FORMATS, FP8_BLOCK, NVFP4_BLOCK, ROUNDINGS, EncodedState, decode, e2m1_values,
                    e4m3_values, encode, quantize_dequantize)
from .minifloat import BF16, E2M1, E4M3, FP16, MiniFloat, round_to_codes, value_table
from .philox import PhiloxKey, philox4x32_10, sr_words

__all__ = [
    "FORMATS", "ROUNDINGS", "FP8_BLOCK", "NVFP4_BLOCK", "EncodedState", "PhiloxKey",
    "encode", "decode", "quantize_dequantize", "philox4x32_10", "sr_words",
    "e4m3_values", "e2m1_values", "MiniFloat", "FP16", "BF16", "E4M3", "E2M1",
    "round_to_codes", "value_table",
]
