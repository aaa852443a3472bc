"""Placeholder GPU executor."""


class GpuExecutor:
    kind = "gpu"

    def __init__(self, cfg):
        self.cfg = cfg

    def unavailable(self):
        return "no CUDA device"

    def device_fields(self):
        return {}
