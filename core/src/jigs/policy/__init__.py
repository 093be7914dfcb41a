"""The rules every step follows, in one place each: names vs secrets and the step's registry of
secret values, redaction, frozen records that never echo a value, the worktree lock, the one way
jigs runs git, host names for the wire, private files written whole, and where jigs keeps its own
state.

Every module here is private; this ``__init__`` imports none of them, so importing one does not
import its siblings.
"""
