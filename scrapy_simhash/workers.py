"""Worker processes that die with their parent.

When the crawl (or ``scrapy-simhash tag``) is killed with
SIGKILL, its workers wait for work forever: each holds both ends of the
executor's call queue, so it never reads EOF. Under the forkserver they also
hold the forkserver's "alive" pipe and the resource tracker's pipe, so those
two live on as well. :func:`exit_with_parent`, run first in every worker,
starts a thread that waits on multiprocessing's parent sentinel (a pipe
whose other end only the real parent holds, or on Windows the parent's
process handle) and ends the worker when the parent is gone; the forkserver
and the resource tracker then read EOF and exit by themselves.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from typing import Any

PARENT_GONE_EXIT_CODE = 75
"""A worker's exit status when it ends because its parent died."""


def exit_with_parent() -> None:
    """End this worker process as soon as the process that started it dies.

    Call it in the worker (a pool's ``initializer``). No-op in a process that
    multiprocessing did not start. The watcher needs the GIL to act: a worker
    stuck in C code that holds it exits when that call returns.
    """
    parent = multiprocessing.parent_process()
    if parent is None:
        return
    threading.Thread(target=_wait_for_parent, args=(parent,), name="exit-with-parent", daemon=True).start()


def _wait_for_parent(parent: Any) -> None:
    parent.join()  # returns when the sentinel reads EOF (POSIX) or the parent's handle is signalled
    # Not sys.exit: the main thread may be busy with a page or blocked on the call queue.
    os._exit(PARENT_GONE_EXIT_CODE)
