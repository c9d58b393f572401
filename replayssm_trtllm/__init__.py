"""ReplaySSM for TensorRT-LLM: cache SSM inputs, not state.

Subpackages:
  reference  float64 spec of every algorithm (torch, CPU)
  formats    FP16 / FP8-E4M3 / NVFP4 state encodings (RTN and Philox stochastic rounding)
  ops        torch custom ops over the CUDA kernel library (ctypes)
  trt        TensorRT plugin helpers (lazy tensorrt import)
  bench      side-by-side GPU benchmarks
"""
__version__ = "0.1.0"
