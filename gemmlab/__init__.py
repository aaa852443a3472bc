"""gemmlab: measure GEMM implementations on NVIDIA GPUs the way a good paper would."""
__version__ = "0.1.0"
