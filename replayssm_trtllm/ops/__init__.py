"""torch custom ops (namespace ``replayssm``) over the CUDA kernel library."""
