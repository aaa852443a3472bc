# Source this on the GPU host (no package registry there) before running gemmlab:
#   source .ci/gpu-env.sh
# It installs the wheels carried in .whl/ (made with ../shared/gpu-host/wheels.sh .whl on a machine
# that has a registry) into /tmp/site and puts them and the checkout on PYTHONPATH.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; return 1; }
export PYTHONPATH=/tmp/site:$PWD
# libcupti from the nvidia-cuda-cupti wheel, for measure.timer=cupti
[ -d /tmp/site/nvidia/cu13/lib ] && export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
export GEMMLAB_CACHE=${GEMMLAB_CACHE:-/tmp/gemmlab-cache}
python3 - <<'PY'
import cupy, sys
p = cupy.cuda.runtime.getDeviceProperties(0)
print("python", sys.version.split()[0], "cupy", cupy.__version__, p["name"].decode(),
      "SMs", p["multiProcessorCount"], "L2", p["l2CacheSize"])
try:
    from cupti import cupti
    print("cupti-python imports:", cupti.ActivityKind.CONCURRENT_KERNEL)
except Exception as e:
    print("cupti-python unavailable:", e)
PY
