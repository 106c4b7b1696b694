"""Worker processes that die with their parent and never re-run the user's script.

Two things go wrong with a plain ``ProcessPoolExecutor`` under a crawl:

- **Orphans.** When the crawl (or ``scrapy-simhash tag``) is killed with
  SIGKILL, its workers wait for work forever: each holds both ends of the
  executor's call queue, so it never reads EOF. Under the forkserver they also
  hold the forkserver's "alive" pipe and the resource tracker's pipe, so those
  two live on as well. :func:`exit_with_parent`, run first in every worker,
  starts a thread that waits on multiprocessing's parent sentinel (a pipe
  whose other end only the real parent holds, or on Windows the parent's
  process handle) and ends the worker when the parent is gone; the forkserver
  and the resource tracker then read EOF and exit by themselves. On Linux a
  forkserver worker also dies with the forkserver (PR_SET_PDEATHSIG), which
  covers a worker stuck in C code holding the GIL.
- **Scripts without a main guard.** Under forkserver and spawn every child
  imports the parent's ``__main__`` as ``__mp_main__`` (to unpickle objects
  defined there). A Scrapy "run from a script" without
  ``if __name__ == "__main__":`` would then run its whole crawl again in every
  worker. Our workers never need the user's script, so :func:`worker_context`
  starts them without it, unless what they are sent refers to ``__main__``
  (a fingerprint function defined in the script), see :func:`needs_main`.
"""

from __future__ import annotations

import ast
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from multiprocessing import spawn
from multiprocessing.context import BaseContext
from typing import Any

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

PARENT_GONE_EXIT_CODE = 75
"""A worker's exit status when it ends because its parent died."""

# fork would copy the reactor's threads and sockets into the workers.
START_METHOD = "forkserver" if sys.platform.startswith("linux") else "spawn"
_BASE = multiprocessing.get_context(START_METHOD)
_BASE_PROCESS: Any = _BASE.Process  # type: ignore[attr-defined]  # (each context's own Process class)

_launching = threading.local()
"""``without_main`` is set while one of our workers is being started, in the starting thread."""


def exit_with_parent() -> None:
    """End this worker process as soon as the process that started it dies.

    Call it in the worker (a pool's ``initializer``). No-op in a process that
    multiprocessing did not start. The watcher thread needs the GIL to act; a
    forkserver worker on Linux is covered without it (:func:`_die_with_forkserver`),
    any other worker stuck in C code that holds the GIL exits when that call returns.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    threading.Thread(target=_wait_for_parent, args=(parent,), name="exit-with-parent", daemon=True).start()
    if os.getppid() != parent.pid:  # started by the forkserver, not by the crawl itself
        _die_with_forkserver()


def _wait_for_parent(parent: Any) -> None:
    parent.join()  # returns when the sentinel reads EOF (POSIX) or the parent's handle is signalled
    # Not sys.exit: the main thread may be busy with a page or blocked on the call queue.
    os._exit(PARENT_GONE_EXIT_CODE)


def _die_with_forkserver() -> None:
    """Linux: have the kernel kill this worker when the forkserver exits, GIL or not.

    The forkserver exits when every copy of its "alive" pipe is closed: the
    crawl holds one, and each worker inherits one (to start processes of its
    own, which ours never do). With the worker's copy closed, the forkserver
    goes as soon as the crawl does, and PR_SET_PDEATHSIG takes the worker with
    it even when it is stuck in C code that holds the GIL (a runaway parse),
    where the watcher thread cannot run. The forkserver is single-threaded, so
    the signal cannot come from the death of some other thread of it.
    """
    if not sys.platform.startswith("linux"):
        return
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    alive = getattr(server, "_forkserver_alive_fd", None)
    if server is None or alive is None:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no prctl: the watcher thread alone will do
        return
    server._forkserver_alive_fd = None
    os.close(alive)


def needs_main(*objects: Any) -> bool:
    """Whether unpickling ``objects`` in a worker would need the parent's ``__main__`` module.

    Conservative: a mention of ``__main__`` anywhere in the pickle counts.
    Objects that cannot be pickled say no (the pool reports that itself).
    """
    try:
        return b"__main__" in pickle.dumps(objects)
    except Exception:
        return False


def worker_context(*, keep_main: bool = False) -> BaseContext:
    """The multiprocessing context for fingerprint workers.

    forkserver on Linux, spawn elsewhere; the workers do not import the
    parent's ``__main__`` unless ``keep_main`` (see the module docstring).
    """
    if keep_main:
        return _BASE
    _install_preparation_filter()
    return _WITHOUT_MAIN


def unguarded_main_script() -> str | None:
    """The running script's path when worker processes that import it would run all of it again.

    In the parent: the script never compares ``__name__`` with ``"__main__"``. In a
    worker: it is importing the parent's script right now (so that script did
    not stop at a guard). None when there is no script file (interactive, a
    frozen program) or it is guarded.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # what multiprocessing checks
        return str(getattr(sys.modules.get("__mp_main__"), "__file__", "the crawl script"))
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    try:
        with open(path, "rb") as file:
            tree = ast.parse(file.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            parts = [node.left, *node.comparators]
            if any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
                isinstance(p, ast.Constant) and p.value == "__main__" for p in parts
            ):
                return None
    return str(path)


SCRIPT_RERUN_MESSAGE = (
    "scrapy-simhash: the fingerprint function (or extractor) is defined in the script {script}, so every "
    "worker process has to import that script, and the script has no "
    '`if __name__ == "__main__":` guard: each worker would run all of it, its crawl included, again. '
    "Put the crawl under that guard, or move the function to an importable module, or set "
    "SIMHASH_WORKERS=0 to fingerprint in the crawl process."
)


# -- starting workers without the parent's __main__ ------------------------------------------------
#
# multiprocessing sends each new child "preparation data" computed by
# spawn.get_preparation_data(); its init_main_from_path / init_main_from_name
# entries make the child run the parent's main module. The forkserver and
# spawn launchers look that function up on the spawn module at each launch,
# so one filter, active only in the thread that is starting one of our
# workers, drops those entries for our workers and leaves every other
# process (the user's own pools included) as it was.


def _install_preparation_filter() -> None:
    if getattr(spawn.get_preparation_data, "_scrapy_simhash_filter", False):
        return
    original = spawn.get_preparation_data

    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if getattr(_launching, "without_main", False):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    get_preparation_data._scrapy_simhash_filter = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data


class _ProcessWithoutMain(_BASE_PROCESS):
    """A worker started without the parent's ``__main__`` (module level: it is pickled to the child)."""

    @staticmethod
    def _Popen(process_obj: Any) -> Any:
        _launching.without_main = True
        try:
            return _BASE_PROCESS._Popen(process_obj)
        finally:
            _launching.without_main = False


class _ContextWithoutMain(type(_BASE)):  # type: ignore[misc]
    Process = _ProcessWithoutMain


_WITHOUT_MAIN = _ContextWithoutMain()
