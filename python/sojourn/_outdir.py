"""Output locations: checked before any work starts, staged writes, stale-partial
cleanup and a lock so that two sweeps cannot share one directory.

* :func:`prepare` checks (and creates) an ``--out`` directory before a run or sweep
  starts, so a file in the way or a path that cannot be created is one line and exit 2,
  not a traceback after the whole simulation; :meth:`OutDir.undo` removes what it created
  when the run is then refused or interrupted (nothing is left behind).
* :func:`staging_dir` makes the hidden ``.sojourn-partial-<pid>-<start>-<rand>`` directory
  a result is written into before it is renamed into place; the name carries the owning
  process (pid and its start time, which tells a reused pid apart), so
  :func:`clean_stale_partials` removes only this tool's partial directories whose owner is
  gone.
* :func:`lock` takes an exclusive ``flock`` on ``DIR/.sojourn.lock`` (released by the
  kernel when the process dies, even by SIGKILL).
"""
from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from ._config import ConfigError

PathLike = Union[str, "os.PathLike[str]"]

PARTIAL_PREFIX = ".sojourn-partial-"
_PARTIAL_RE = re.compile(r"^\.sojourn-partial-(\d+)-(\d+)-[0-9a-f]+$")
#: Partial directories of the old naming (no owner in the name) are removed after this long.
LEGACY_PARTIAL_AGE_S = 24 * 3600
LOCK_NAME = ".sojourn.lock"


def _start_ticks(pid: int) -> Optional[int]:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), or
    None when there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    rest = stat[stat.rfind(")") + 2:].split()
    try:
        return int(rest[19])  # field 22, starttime
    except (IndexError, ValueError):
        return None


def _alive(pid: int, start: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    s = _start_ticks(pid)
    return s is None or s == start  # without /proc, a live pid is assumed to be the owner


def staging_dir(parent: Path) -> Path:
    """Creates a fresh partial directory in ``parent`` named after this process."""
    me = os.getpid()
    name = f"{PARTIAL_PREFIX}{me}-{_start_ticks(me) or 0}-{secrets.token_hex(4)}"
    d = parent / name
    d.mkdir(mode=0o755)
    return d


def clean_stale_partials(parent: Path) -> list:
    """Removes ``.sojourn-partial-*`` directories in ``parent`` whose owning process is
    gone (or, for old-style names, that are older than a day). Returns what it removed."""
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return removed
    for e in entries:
        if not e.name.startswith(PARTIAL_PREFIX) or not e.is_dir(follow_symlinks=False):
            continue
        m = _PARTIAL_RE.match(e.name)
        if m:
            stale = not _alive(int(m.group(1)), int(m.group(2)))
        else:
            try:
                stale = time.time() - e.stat(follow_symlinks=False).st_mtime > LEGACY_PARTIAL_AGE_S
            except OSError:
                stale = False
        if stale:
            shutil.rmtree(e.path, ignore_errors=True)
            removed.append(e.name)
    return removed


@dataclass
class OutDir:
    """A checked output directory; ``created`` lists the directories :func:`prepare` made."""

    path: Path
    created: list = field(default_factory=list)

    def undo(self) -> None:
        """Removes the directories :func:`prepare` created, if they are still empty."""
        for d in reversed(self.created):
            try:
                d.rmdir()
            except OSError:
                break
        self.created = []


def prepare(out: PathLike, what: str = "--out") -> OutDir:
    """Checks that ``out`` is (or can be made) a writable directory, and creates it.
    Raises :class:`ConfigError` naming ``what`` and the path."""
    if out is None or str(out) == "":
        raise ConfigError(what, "", "expected a directory path")
    path = Path(out)
    name = f"{what} {out}"
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            kind = "a file" if path.is_file() else ("a broken symlink" if not path.exists() else "not a directory")
            raise ConfigError(name, "", f"exists and is {kind}; --out names a directory (give a new or existing directory)")
        _check_writable(path, name)
        return OutDir(path)
    # Find the nearest existing ancestor; every missing level is created (and undone on failure).
    missing = []
    cur = path
    while not cur.exists() and not cur.is_symlink():
        missing.append(cur)
        if cur.parent == cur:
            break
        cur = cur.parent
    if cur.exists() and not cur.is_dir():
        raise ConfigError(name, "", f"{cur} is a file, so no directory can be created below it")
    created = []
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            OutDir(path, created).undo()
            reason = e.strerror or str(e)
            if e.errno in (errno.ENOENT, errno.EROFS, errno.EPERM, errno.EACCES):
                reason = f"cannot create directory {d} ({e.strerror})"
            raise ConfigError(name, "", reason) from None
        created.append(d)
    od = OutDir(path, created)
    try:
        _check_writable(path, name)
    except ConfigError:
        od.undo()
        raise
    return od


def _check_writable(path: Path, name: str) -> None:
    probe = path / f".sojourn-probe-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        raise ConfigError(name, "", f"cannot write into this directory ({e.strerror})") from None


class Locked(ConfigError):
    """Another live sojourn process holds the directory's lock."""


class DirLock:
    """An exclusive lock on ``DIR/.sojourn.lock`` (``fcntl.flock``; the kernel drops it when
    the holder dies). The file holds the holder's pid for the message."""

    def __init__(self, directory: PathLike, what: str = "sweep"):
        self.path = Path(directory) / LOCK_NAME
        self.what = what
        self.fd: Optional[int] = None

    def acquire(self) -> "DirLock":
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            try:
                holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            except OSError:
                holder = "?"
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise Locked(str(self.path.parent), "",
                             f"another {self.what} (pid {holder}) is running in this directory; wait for it, "
                             "or give another --out") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock; the file stays (unlinking would race)
            self.fd = None

    def __enter__(self) -> "DirLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
