"""The package version, in one place (setup.cfg reads it from here)."""

__version__ = "1.0.0"
