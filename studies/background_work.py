"""A function called in a forked child process while this one computes on (docs/sysmodel.md,
Speed, twenty-sixth increment).

``fred eval``'s steps are not all one chain: the strategy sweeps read nothing the other steps
compute (and leave nothing in the model's caches the others read: measured, the rest cost the
same CPU without them), and three of the four plots read nothing computed after the
calibration. :class:`ForkedCall` runs such a piece in a child made by ``fork`` -- a copy of
this process at that moment, its imports, caches and arguments included, nothing re-imported
and nothing pickled on the way in -- on the machine's second core, and hands its return value
back (pickled through a pipe: floats exactly, so every figure is the one computed in process).
The CPU time is about the same (a copy's caches are filled again where both need an entry);
the wall time shrinks by what the two processes overlap.

The child ends with ``os._exit`` (``multiprocessing``'s fork start method), so the parent's exit
handlers and buffered output are not run or written twice (``multiprocessing`` flushes stdout
and stderr before forking). An exception in the child is raised again by
:meth:`ForkedCall.result` in the parent, with the child's traceback added as a note; a child
that dies without answering is a :class:`FredError` naming the call. Where ``fork`` is not
available (not Linux) or there is one CPU, the call runs in process at
:meth:`~ForkedCall.start`, as it did before.

:func:`not_yet` stands for a value that is not computed when the child is forked: any use of it
there raises, so a function that starts to read it fails loudly instead of using a stale or
empty value.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import traceback

from hdl.contracts.errors import FredError

__all__ = ["ForkedCall", "NotYetComputed", "not_yet", "can_fork"]


def can_fork() -> bool:
    """Whether a call can run beside this process: the ``fork`` start method exists and there
    are two CPUs or more."""
    return "fork" in multiprocessing.get_all_start_methods() and (os.cpu_count() or 1) > 1


class NotYetComputed:
    """A value not computed when a child is forked: any use raises :class:`FredError`."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _refuse(self, *_args, **_kwargs):
        raise FredError(f"{self._name!r} was read in a background process forked before it is "
                        f"computed: read it in the parent, after it (studies/background_work.py)")

    __iter__ = __len__ = __bool__ = __getitem__ = __float__ = __eq__ = __lt__ = __gt__ = _refuse
    __hash__ = None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._refuse()


def not_yet(name: str) -> NotYetComputed:
    """The stand-in for ``name`` in what a child process is given."""
    return NotYetComputed(name)


class ForkedCall:
    """``fn(*args, **kwargs)`` in a forked child process.

    Parameters: ``in_background`` False calls it in process at :meth:`start` (the default
    follows :func:`can_fork`). Latency: :meth:`start` returns at once (a fork: the child shares
    the parent's memory copy-on-write); :meth:`result` blocks until the child has answered and
    ended. The value must pickle. Call :meth:`result` (or :meth:`abandon`, if the parent fails)
    exactly once before the command ends.
    """

    def __init__(self, fn, *args, in_background: bool | None = None, **kwargs) -> None:
        self._call = (fn, args, kwargs)
        self._in_background = can_fork() if in_background is None else in_background
        self._process = self._receiver = None
        self._answer = None

    @property
    def name(self) -> str:
        return getattr(self._call[0], "__qualname__", repr(self._call[0]))

    def start(self) -> "ForkedCall":
        if not self._in_background:
            ok, value, _ = _answer(*self._call)   # raised here, not "in the background"
            self._answer = (ok, value, "")
            return self
        receiver, sender = multiprocessing.Pipe(duplex=False)
        self._process = multiprocessing.get_context("fork").Process(
            target=_call_and_send, args=(sender, *self._call), name=f"fred-{self.name}", daemon=True)
        self._process.start()
        sender.close()          # the child's end: closed here, so a child that dies is an EOF
        self._receiver = receiver
        return self

    def result(self):
        """The call's return value; its exception raised again (the child's traceback added)."""
        answer, self._answer = self._answer, None
        if self._process is not None:
            process, receiver, self._process, self._receiver = self._process, self._receiver, None, None
            try:
                answer = receiver.recv()       # before join: a large answer fills the pipe
            except EOFError:
                answer = None
            finally:
                receiver.close()
                process.join()
            if answer is None:
                raise FredError(f"the background process computing {self.name} ended without an "
                                f"answer (exit code {process.exitcode})")
        ok, value, child_traceback = answer
        if ok:
            return value
        if child_traceback:
            value.add_note(f"in the background process computing {self.name}:\n{child_traceback}")
        raise value

    def abandon(self) -> None:
        """Stop the child (the parent failed: its answer is not wanted) and join it."""
        process, self._process, self._answer = self._process, None, None
        if process is not None:
            process.terminate()
            process.join()
            self._receiver.close()
            self._receiver = None


def _answer(fn, args, kwargs) -> tuple:
    """(True, value, "") or (False, exception, traceback text)."""
    try:
        return True, fn(*args, **kwargs), ""
    except Exception as exc:   # noqa: BLE001 -- raised again in the parent
        return False, exc, traceback.format_exc()


def _call_and_send(sender, fn, args, kwargs) -> None:
    answer = _answer(fn, args, kwargs)
    try:
        sender.send(answer)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:   # an unpicklable answer
        sender.send((False, FredError(f"{fn.__qualname__}'s answer cannot be sent back: {exc}"),
                     answer[2]))
    finally:
        sender.close()
