"""The library version (its own module so that the modules writing it into files need not import
the package ``gpu_ivm``, which imports them)."""

__version__ = "0.1.0"
