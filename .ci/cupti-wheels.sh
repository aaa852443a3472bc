#!/usr/bin/env bash
# Adds to DIR (default .whl) the wheels that measure.timer=cupti and its GPU tests need on a GPU host without a
# package registry (Python 3.12, CUDA 13): cupti-python, the libcupti it loads and pyelftools. Not in
# ../shared/gpu-host/wheels.sh's list, whose platforms also leave out nvidia-cuda-cupti's manylinux_2_25 tag.
# The host's own cuda-bindings serves cupti-python; .ci/gpu-env.sh puts the wheel's libcupti on LD_LIBRARY_PATH.
set -euo pipefail
dir=${1:-.whl}
mkdir -p "$dir"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$dir" cupti-python==13.0.1 nvidia-cuda-cupti==13.0.85 pyelftools==0.33 \
  2>&1 | grep -v '^WARNING' || true
ls -1 "$dir" | grep -Ei 'cupti|elftools'
