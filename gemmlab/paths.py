"""Where the project's own files are: the checkout, its configs and its kernels."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF_DIR = ROOT / "conf"
VARIANT_DIR = CONF_DIR / "variant"
KERNELS_DIR = ROOT / "kernels" / "cuda"
