"""Finding harness kinds: pluggy plus entry points, the plugin contract check a kind passes at
registration, and jigs-core's own version.

Every module here is private; this ``__init__`` imports none of them, so importing one does not
import its siblings.
"""
