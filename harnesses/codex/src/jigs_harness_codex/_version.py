"""The distribution's version (sent to the app server as the client version)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
