"""Which simulated thread is running: Numba's simulator asks threading.current_thread(), which names the Python
thread; where a block's simulated threads are greenlets taking turns on one Python thread (simwarp), the block's
scheduler says here which one has the turn."""
from __future__ import annotations

import threading

running = threading.local()      # .thread: the simulated thread whose greenlet runs now on this Python thread
_real_current_thread = threading.current_thread


def current_thread():
    """The simulated thread running now (a BlockThread), or, outside a greenlet block, threading's own."""
    t = getattr(running, "thread", None)
    return t if t is not None else _real_current_thread()
