"""The one way jigs runs git: nothing the repository holds is executed, no worker secret is passed.

A worktree is written by the agent, and so is its ``.git``: hooks (``.git/hooks/*``), the
repository's config (``core.fsmonitor``, ``core.hooksPath``, ``include.path`` to a planted file,
filter drivers that ``.gitattributes`` selects, ``gpg.program`` with ``commit.gpgSign``, an
``ext::`` remote ...). Git run by the worker with the worker's environment would run any of
them with the model key and every other secret of the worker. So every git command jigs runs:

- gets an environment built from empty: ``PATH`` (git's own directory and the system's), ``HOME``
  pointing nowhere, no system or global config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL``),
  no system attributes, ``LC_ALL=C``, no terminal prompt, no replace refs -- and nothing else of
  the worker (no key, no token, no ``GIT_DIR`` the worker happened to have);
- gets command-line config (the highest precedence: the repository's config and what it
  includes cannot override it) that turns off every setting git 2.39 would execute for the
  commands jigs runs: hooks, fsmonitor, pager, editor, askpass, credential helpers, ssh and
  proxy commands, external diff, commit signing, auto gc/maintenance, every transport
  (``protocol.*.allow=never``: no lazy fetch of a partial clone, no ``ext::``);
- gets every filter driver the repository's config names (``filter.<name>.clean``, ``smudge``,
  ``process``: the names cannot be known in advance, ``.gitattributes`` picks them) emptied
  and made optional, through ``GIT_CONFIG_COUNT`` (a name with ``=`` in it cannot be misparsed
  there, as it would be by ``-c``);
- runs only builtin plumbing or porcelain commands (an alias can never shadow a builtin).

Diff drivers (textconv, ``diff.<x>.command``) only run when git diffs: the one diff jigs asks
for (:func:`jigs.worktrees.diff`) carries ``--no-ext-diff --no-textconv``, and a commit message is
read with ``cat-file``, never through ``log``.

A failure raises the :class:`~jigs.errors.WorktreeError` subclass the caller names
(:class:`~jigs.errors.CheckpointError` by default), with what the caller needs in its fix.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import anyio

from jigs.engine._logging import logger
from jigs.errors import CheckpointError, WorktreeError

__all__ = ["GitRunner", "commit_message", "copy_index", "hardened_env", "hardening_options"]

#: Config every jigs git command runs with (``-c``): what a repository could make git execute.
_OVERRIDES: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.pager", "cat"),
    ("core.editor", ":"),
    ("sequence.editor", ":"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.attributesFile", "/dev/null"),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("diff.external", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
    *(
        (f"protocol.{name}.allow", "never")
        for name in ("file", "ext", "ssh", "git", "http", "https")
    ),
)
#: The directories ``PATH`` holds besides git's own (git runs its helpers from its exec path).
_SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
#: What a filter driver becomes: no command (git then passes the bytes through), not required.
_EMPTY_FILTER = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
_FILTER_KEY = re.compile(r"^filter\.(.+)\.(clean|smudge|process|required)$", re.DOTALL)


def hardening_options() -> list[str]:
    """The ``-c`` options every jigs git command carries, in order."""
    options: list[str] = []
    for key, value in _OVERRIDES:
        options += ["-c", f"{key}={value}"]
    return options


def hardened_env(git: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a jigs git command (built from empty; ``extra`` adds
    ``GIT_INDEX_FILE``, the commit identity or filter overrides)."""
    path = [str(git.parent), *(p for p in _SYSTEM_PATH if p != str(git.parent))]
    env = {
        "PATH": os.pathsep.join(path),
        "HOME": "/nonexistent",
        "LC_ALL": "C",
        "LANG": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_PAGER": "cat",
        "GIT_EDITOR": ":",
        "GIT_OPTIONAL_LOCKS": "0",
    }
    env.update(extra or {})
    return env


def find_git(worktree: Path, error: type[WorktreeError] = CheckpointError) -> Path:
    """The git executable on the worker's ``PATH``: absolute, and never one inside the worktree
    (an agent can write there). Raises ``error``."""
    found = shutil.which("git")
    if found is None or not os.path.isabs(found):
        raise error(
            "git was not found on PATH (as an absolute path); install git to use jigs' worktree "
            "checkpoints and provisioned worktrees",
            worktree=worktree,
        )
    git = Path(found).resolve()
    if git.is_relative_to(worktree.resolve()):
        raise error(
            f"the git on PATH ({found}) is inside the worktree, where the agent can write; put "
            f"the system's git first on the worker's PATH",
            worktree=worktree,
        )
    return git


class GitRunner:
    """Runs hardened git commands in one worktree. Open it with :meth:`open`: that resolves
    git, reads which filter drivers the repository names and checks its work tree is the one
    given (``core.worktree`` cannot send jigs' ``clean`` elsewhere)."""

    def __init__(
        self,
        worktree: Path,
        git: Path,
        identity: Mapping[str, str] | None = None,
        *,
        error: type[WorktreeError] = CheckpointError,
        needs: str = "the worktree checkpoint needs a git repository without merge conflicts",
    ) -> None:
        self.worktree = worktree
        self.git = git
        #: What a failure raises, and what its message says the caller needs (the fix).
        self.error = error
        self.needs = needs
        #: The filter drivers the repository's config names (all neutralised).
        self.filters: tuple[str, ...] = ()
        self._base_env: dict[str, str] = dict(identity or {})

    @classmethod
    async def open(
        cls,
        worktree: Path,
        identity: Mapping[str, str] | None = None,
        *,
        error: type[WorktreeError] = CheckpointError,
        needs: str = "the worktree checkpoint needs a git repository without merge conflicts",
    ) -> GitRunner:
        runner = cls(worktree, find_git(worktree, error), identity, error=error, needs=needs)
        # reading config runs nothing; --includes: a planted include.path counts too
        listed = await runner.run(
            "config", "-z", "--includes", "--get-regexp", r"^filter\.", ok=True
        )
        runner._neutralise_filters(listed)
        top = await runner.run("rev-parse", "--show-toplevel")
        real = worktree.resolve()
        if not (Path(top).resolve() == real or Path(top).resolve() in real.parents):
            raise runner.error(
                f"the repository's work tree is {top}, not {worktree} (core.worktree was set, "
                f"by the agent or by hand); unset it with `git config --unset core.worktree`",
                worktree=worktree,
            )
        return runner

    def _neutralise_filters(self, listed: str) -> None:
        names: set[str] = set()
        for entry in listed.split("\0"):
            key = entry.split("\n", 1)[0]
            match = _FILTER_KEY.match(key)
            if match:
                names.add(match.group(1))
        env: dict[str, str] = {}
        count = 0
        for name in sorted(names):
            for attribute, value in _EMPTY_FILTER:
                env[f"GIT_CONFIG_KEY_{count}"] = f"filter.{name}.{attribute}"
                env[f"GIT_CONFIG_VALUE_{count}"] = value
                count += 1
        if count:
            env["GIT_CONFIG_COUNT"] = str(count)
            logger.info("git.filters.neutralised", worktree=str(self.worktree), drivers=len(names))
        self.filters = tuple(sorted(names))
        self._base_env.update(env)

    async def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        ok: bool = False,
        local_transport: bool = False,
        strip: bool = True,
    ) -> str:
        """``git <args>`` in the worktree; its stdout (stripped unless ``strip`` is False). A
        failure raises :attr:`error` unless ``ok`` (then the output is ``""``).
        ``local_transport`` lets this one command read another repository on this machine by
        its path (``clone``, ``fetch``); every other transport stays off."""
        full = hardened_env(self.git, {**self._base_env, **(env or {})})
        local = ["-c", "protocol.file.allow=always"] if local_transport else []
        argv = [str(self.git), "--no-pager", *hardening_options(), *local, *args]
        result = await anyio.run_process(
            argv, cwd=self.worktree, env=full, check=False, stdin=subprocess.DEVNULL
        )
        if result.returncode != 0 and not ok:
            raise self.error(
                f"git {args[0]} failed in {self.worktree} ({result.returncode}): "
                f"{result.stderr.decode(errors='replace').strip()[:300]}; {self.needs}",
                worktree=self.worktree,
            )
        if result.returncode != 0:
            return ""
        out = result.stdout.decode(errors="replace")
        return out.strip() if strip else out


def copy_index(git_dir: Path, index: Path) -> None:
    """Seed the temporary index from the repository's own (its stat cache spares rehashing
    unchanged files): only a regular file, never through a link or a FIFO the agent planted."""
    source = git_dir / "index"
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    with os.fdopen(fd, "rb") as fh:
        if stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            index.write_bytes(fh.read())


def commit_message(raw: str) -> str:
    """The message of a commit as ``git cat-file commit`` prints it (after the first blank line)."""
    _headers, _sep, message = raw.partition("\n\n")
    return message
