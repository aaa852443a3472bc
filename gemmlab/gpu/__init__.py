"""Facts about the GPU a process runs on: which one it is (identity), its properties (device),
arrays in every storage type (arrays), and TMA descriptors for the Hopper kernels (tma)."""
