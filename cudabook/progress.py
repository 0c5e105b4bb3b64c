"""What a long step is doing, said as it starts and again while it lasts: a learner never watches a silent cell
(lessons, sweeps, live profiles) and `make bench` never sits silent."""
from __future__ import annotations

import contextlib

_BEATING: list = []          # the Progress objects whose heartbeat runs now, innermost last
FIRST_LAUNCH = "launching and checking (a first launch compiles the kernel)"   # the check cells' watched step


def _write_line(line):
    """One line to stdout in one write, flushed: a heartbeat's line never lands inside another thread's."""
    import sys
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Progress:
    """What a lesson is doing, said as it starts each step and as it ends, one short line each, with the seconds
    since the cell began: a learner never watches a silent cell. Inside `with say.heartbeat():` a step that has
    said nothing for `every` seconds (a compile, a peer, seconds of back-to-back runs) is said again, with how long
    it has taken so far."""

    def __init__(self, out=None, every: float = 5.0):
        import threading
        import time
        self.out, self.t0 = out or _write_line, time.perf_counter()
        self.every, self.step, self.step_t, self.last_t = every, None, self.t0, self.t0
        self._lock = threading.Lock()      # the caller's thread and the heartbeat's change the same state

    def __call__(self, line):
        import time
        with self._lock:
            now = time.perf_counter()
            self.step, self.step_t, self.last_t = line, now, now
            self._say(now, line)

    def note(self, line):
        """Make `line` the step, unsaid: the heartbeat says it only if it lasts (a grader's case, say)."""
        import time
        with self._lock:
            self.step, self.step_t = line if line.endswith("…") else line + " …", time.perf_counter()

    def _say(self, now, line):
        self.out(f"  [{now - self.t0:6.1f} s] {line}")

    def beat(self, now=None):
        """Say the step again if it has been quiet for `every` seconds (the heartbeat's thread calls this)."""
        import time
        with self._lock:
            now = time.perf_counter() if now is None else now
            if self.step is None or now - self.last_t < self.every:
                return
            self.last_t, secs = now, now - self.step_t
            if self.step.endswith("…"):           # a step begun: still at it (a step noted a moment ago: no
                so_far = f" ({secs:.0f} s so far)" if secs >= 1 else ""      # "0 s so far")
                self._say(now, f"… still: {self.step.rstrip(' …')}{so_far}")
            else:                                 # a result said: what follows it has not said itself yet
                self._say(now, f"… still working, {secs:.0f} s after: {self.step}")

    def heartbeat(self):
        """A context in which a quiet step is said again every `every` seconds, by a thread of its own."""
        import threading

        @contextlib.contextmanager
        def beating():
            stop = threading.Event()

            def run():
                while not stop.wait(0.25):
                    try:
                        self.beat()
                    except Exception:          # a heartbeat that cannot speak stays silent, never a traceback
                        return
            thread = threading.Thread(target=run, daemon=True, name="cudabook-heartbeat")
            _BEATING.append(self)
            try:
                thread.start()
                yield self
            finally:
                _BEATING.remove(self)
                stop.set()
                if thread.is_alive():
                    thread.join()
        return beating()


@contextlib.contextmanager
def quiet():
    """A block in which watched() says nothing: a child process whose output its parent reads."""
    _BEATING.append(None)
    try:
        yield
    finally:
        _BEATING.remove(None)


@contextlib.contextmanager
def watched(step: str, every: float = 5.0):
    """A block that may last (a first launch compiles its kernel; the simulator is slow): said as `step`, with
    its seconds so far, only if it stays quiet for `every` seconds. Inside a running heartbeat (a ladder, a
    grade) it adds nothing: that one already says its own, better-named step."""
    if _BEATING:
        yield None
        return
    p = Progress(every=every)
    p.note(step)
    with p.heartbeat():
        yield p
