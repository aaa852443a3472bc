"""Many runs: merging a sweep's rows (merge), Hydra's callbacks (callbacks), one run per folder and per
GPU (locks, pinning)."""
