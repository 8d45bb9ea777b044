"""The GPU backend's device side: Fr arithmetic and NTT kernels from kernels/, through CuPy."""
