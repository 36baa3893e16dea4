"""The folder `ops repro` writes, and what makes one its own: repro.json lists every file it
wrote with its SHA-256, so a rewrite deletes only files ops wrote that still hold what it
wrote, and refuses (one line, before the device runs) a folder it cannot verify as its own.
Nothing is read or written through a symbolic link inside the folder."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .selection import BadInput

MARKER = "repro.json"       # says the folder was written by ops repro, with each file's digest
MARKER_BYTES = 64 << 20     # a marker larger than this is not one ops wrote
SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass
class Folder:
    """OUTDIR as checked before the run: the files a previous `ops repro` wrote there that
    still hold what it wrote (relative names), which a rewrite replaces."""
    out: Path
    owned: list[str] = field(default_factory=list)

    def write(self, files: dict[str, bytes], marker: dict) -> None:
        """Replace the folder's files with `files` and the marker (`marker` gains the files'
        names and digests): everything checked before anything is deleted or written."""
        verified = check_folder(self.out)        # again: the run took a while
        for name in files:
            _check_name(name, "a file to write")
        marker = {**marker, "files": sorted(files), "sha256": {k: _digest(v) for k, v in sorted(files.items())}}
        new = {**files, MARKER: (json.dumps(marker, indent=1) + "\n").encode()}
        name = "."
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            with _opened(self.out) as root:
                taken = [n for n in files if n not in verified.owned and _exists(root, n)]
                if taken:
                    raise BadInput(f"{self.out / taken[0]} exists and was not written by ops repro: nothing written")
                for name in [*verified.owned, MARKER]:
                    _remove(root, name)
                for name, data in new.items():
                    _create(root, name, data)
        except OSError as e:    # the disk full, the folder's mode changed during the run
            raise BadInput(f"cannot write {self.out / name}: {e.strerror}") from None


def check_folder(out: Path) -> Folder:
    """OUTDIR before anything runs: a new or empty folder that can be written, or one whose
    repro.json ops repro wrote and whose listed files still hold what it wrote. Anything
    else is BadInput (one line)."""
    try:
        return _check_folder(out)
    except OSError as e:      # unreadable, gone while read
        raise BadInput(f"cannot read {out}: {e.strerror}") from None


def _check_folder(out: Path) -> Folder:
    if out.is_symlink() and not out.exists():
        raise BadInput(f"{out} is a symbolic link to nothing: name a folder")
    if out.exists() and not out.is_dir():
        raise BadInput(f"{out} exists and is not a folder")
    _check_writable(out)
    if not out.exists() or not any(out.iterdir()):
        return Folder(out)
    if not os.path.lexists(out / MARKER):
        raise BadInput(f"{out} is not empty and was not written by ops repro: name a new folder")
    with _opened(out) as root:
        digests = _marker(root, out)
        owned = []
        for name, digest in digests.items():
            found = _file_digest(root, name, out)
            if found is None:
                continue         # gone: nothing to delete
            if found != digest:
                raise BadInput(f"{out / name} changed since ops repro wrote it: not rewriting {out} "
                               "(name a new folder)")
            owned.append(name)
    return Folder(out, owned)


def _check_writable(out: Path) -> None:
    """OUTDIR (or the nearest folder above it that exists) takes a new folder: under a file,
    under /proc or on a read-only disk it does not, and that is known before the run."""
    where = out if out.exists() else next(p for p in out.absolute().parents if os.path.lexists(p))
    if not where.is_dir():
        raise BadInput(f"cannot write {out}: {where} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".ops-repro-", dir=where))
    except OSError as e:
        raise BadInput(f"cannot write {out}: {e.strerror} ({where})") from None


def _marker(root: int, out: Path) -> dict[str, str]:
    """The marker's digests by file name; a marker ops repro did not write is BadInput."""
    f = _open(root, MARKER, out)
    with f:
        data = f.read(MARKER_BYTES + 1)
    try:
        marker = json.loads(data) if len(data) <= MARKER_BYTES else None
    except (ValueError, RecursionError):     # not JSON, or nested past the parser's depth
        marker = None
    digests = marker.get("sha256") if isinstance(marker, dict) and marker.get("tool") == "ops repro" else None
    if not isinstance(digests, dict) or not all(isinstance(k, str) and isinstance(v, str) and SHA256.fullmatch(v)
                                                for k, v in digests.items()):
        raise BadInput(f"{out / MARKER} is not one ops repro wrote (with its files' digests): not rewriting {out}; "
                       "name a new folder")
    for name in digests:
        _check_name(name, f"{out / MARKER} lists")
    return digests


def _check_name(name: str, what: str) -> None:
    """A name ops repro writes: a plain relative path inside the folder, never the marker."""
    parts = PurePosixPath(name).parts
    if (not parts or name.startswith("/") or str(PurePosixPath(name)) != name or ".." in parts
            or "\0" in name or name == MARKER):
        raise BadInput(f"{what} {name!r}: not a file ops repro writes")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def _opened(folder: Path):
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _parent(root: int, name: str, create: bool = False):
    """The folder holding `name` (relative to root), reached without following a link:
    a link or a file on the way is OSError (ELOOP, ENOTDIR)."""
    *dirs, _ = PurePosixPath(name).parts
    fds = [root]
    try:
        for d in dirs:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(d, dir_fd=fds[-1])
            fds.append(os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        yield fds[-1]
    finally:
        for fd in fds[1:]:
            os.close(fd)


def _open(root: int, name: str, out: Path):
    """A listed file, opened to read (None when it is gone); a link, a folder or a device
    in its place is BadInput: not what ops wrote."""
    try:
        with _parent(root, name) as parent:
            fd = os.open(PurePosixPath(name).name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise BadInput(f"{out / name} is not a file ops repro wrote ({_why(e)}): not rewriting {out}") from None
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise BadInput(f"{out / name} is not a file ops repro wrote (not a plain file): not rewriting {out}")
    return f


def _file_digest(root: int, name: str, out: Path) -> str | None:
    f = _open(root, name, out)
    if f is None:
        return None
    h = hashlib.sha256()
    with f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _why(e: OSError) -> str:
    why = {errno.ELOOP: "a symbolic link", errno.ENOTDIR: "a link, or under a file or a link"}
    return why.get(e.errno or 0, e.strerror or str(e))


def _exists(root: int, name: str) -> bool:
    try:
        with _parent(root, name) as parent:
            os.stat(PurePosixPath(name).name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return True     # a link or a file where a folder of it goes: taken
    return True


def _remove(root: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError), _parent(root, name) as parent:
        os.unlink(PurePosixPath(name).name, dir_fd=parent)
    parts = PurePosixPath(name).parts[:-1]     # its folders, emptied: gone too
    for k in range(len(parts), 0, -1):
        try:
            with _parent(root, "/".join(parts[:k])) as parent:
                os.rmdir(parts[k - 1], dir_fd=parent)
        except OSError:
            break


def _create(root: int, name: str, data: bytes) -> None:
    with _parent(root, name, create=True) as parent:
        fd = os.open(PurePosixPath(name).name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644,
                     dir_fd=parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
