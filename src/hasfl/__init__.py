"""hasfl: reproducibility pipeline for the HAS-FL paper."""

__version__ = "0.1.0"
