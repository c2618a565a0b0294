# SPDX-License-Identifier: GPL-3.0-or-later
"""The test cache (AISB_TEST_CACHE), shared by every test run and benchmark on this
machine at the same time.

Each kind of entry (trees, storage, runs) has a directory with a lock file of its own.
An entry appears there only complete, by a rename made under that lock. Whoever uses an
entry holds a flock on it for as long as it does: shared to copy from it, exclusive to
own it. An entry is removed only when its flock can be taken at once, and it is first
renamed out of sight under the directory's lock, so nobody finds it half deleted. Locks
die with their process: what a killed run held is free again, and the next run removes it.
"""

import fcntl
import os
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

# Entries being made (by a run that may die before it is done), and entries on their way out.
NEW = ".new-"
TRASH = ".trash-"


def cache_root() -> Path:
    """Where trees and images live between runs on the same machine."""
    return Path(os.environ.get("AISB_TEST_CACHE", "/var/cache/aisb-sandbox-tests"))


@contextmanager
def locked(directory: Path):
    """DIRECTORY's own lock, held while its entries are looked up, added or removed."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def hold(entry: Path, shared: bool = False, wait: bool = True):
    """A descriptor that holds ENTRY's flock (shared: to copy from it; exclusive: to own it),
    or None when WAIT is false and someone else holds it. Closing the descriptor lets go.
    It is not inherited: only this process holds the entry."""
    descriptor = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(descriptor, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def new_entry(directory: Path):
    """(path, descriptor): an empty directory in DIRECTORY that this process owns until it
    closes the descriptor; nobody else uses it, and remove_unused() skips it meanwhile.
    Call with DIRECTORY locked."""
    path = Path(tempfile.mkdtemp(prefix=NEW, dir=directory))
    return path, hold(path)


def remove_unused(entry: Path) -> bool:
    """Move ENTRY out of sight unless someone holds it; True if it did. Call with its
    directory locked, then empty_trash() once the lock is let go."""
    try:
        descriptor = hold(entry, wait=False)
    except FileNotFoundError:  # deleted meanwhile by a run of a checkout older than these locks
        return False
    if descriptor is None:
        return False
    to_trash(entry)
    os.close(descriptor)
    return True


def to_trash(entry: Path) -> Path:
    """ENTRY renamed out of sight, for empty_trash(); its new path."""
    trash = entry.with_name(TRASH + uuid.uuid4().hex)
    entry.rename(trash)
    return trash


def remove_abandoned(directory: Path):
    """Move aside the entries of DIRECTORY that a run began and died before finishing.
    Call with DIRECTORY locked."""
    for entry in directory.glob(NEW + "*"):
        remove_unused(entry)


def delete_argv(path: Path) -> list:
    """The command deleting PATH and everything under it, ignoring what is already gone and
    entering nothing on another file system. rm, not shutil.rmtree: a workstation's 2 GB
    tree (49,000 files) took 10.3 s with rmtree and 2.6 s with rm."""
    return ["rm", "-rf", "--one-file-system", "--", str(path)]


def delete_tree(path: Path):
    """Delete PATH and everything under it, here and now."""
    subprocess.run(delete_argv(path), check=False)


def delete_in_background(path: Path):
    """Move PATH out of sight at once and delete it in a process of its own, which outlives
    this one: the two teardowns at the end of a whole run (the reference workstations, with
    every recipe's images) took 96 s and 88 s with rm, on the run's critical path. Trash a
    killed deleter leaves is emptied by the next empty_trash() of its directory."""
    trash = to_trash(path)
    # The deleter holds the trash's flock: empty_trash() leaves it alone meanwhile.
    subprocess.Popen(["flock", str(trash)] + delete_argv(trash),
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)


def empty_trash(directory: Path):
    """Delete what remove_unused() moved aside: nobody can find it any more. Trash whose
    deleter is still at work (it holds the flock) is left to it."""
    for entry in directory.glob(TRASH + "*"):
        try:
            descriptor = hold(entry, wait=False)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if descriptor is None:
            continue
        try:
            delete_tree(entry)
        finally:
            os.close(descriptor)
