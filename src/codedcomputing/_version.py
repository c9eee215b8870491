"""The package version (one place: read by the build and by ``coded --version``)."""

__version__ = "0.1.0"
