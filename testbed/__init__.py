"""Network-emulation testbed for ML-training interconnects."""

__version__ = "0.1.0"
