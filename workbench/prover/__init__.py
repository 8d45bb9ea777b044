"""The prover: phases over a backend (CPU now; GPU kernels in kernels/)."""
