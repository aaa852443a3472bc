"""Placeholder: implemented in its own issue."""
from .base import Backend


class _B(Backend):
    name = "cublas"
    kind = "gpu"


BACKEND = _B
