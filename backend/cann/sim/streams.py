"""Streams, events and stream capture: work queued on a stream runs at its synchronisation,
an event marks a point in a stream's queue, and a capture records the work into a model
run instance (aclmdlRI) that replays it."""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Callable

from .binding import ffi, lib

from .refusals import SimError
from .state import STATE, need_device


@dataclass(eq=False)
class Capture:
    """A stream between aclmdlRICaptureBegin and aclmdlRICaptureEnd: its work is
    recorded in `tasks`; `invalid` says why the capture failed (its end refuses)."""
    mode: int
    thread: int
    tasks: list[Callable[[], None]] = field(default_factory=list)
    invalid: str = ""
    active: bool = True
    work: list[dict] = field(default_factory=list)   # cost records of the launches (cost.py)


@dataclass(eq=False)
class Stream:
    device: int = 0
    # a deque: a graph queues thousands of launches before its one synchronisation
    queue: collections.deque[Callable[[], None]] = field(default_factory=collections.deque)
    capture: Capture | None = None


@dataclass(eq=False)
class Event:
    flags: int | None = None            # None: aclrtCreateEvent's (sync and timing)
    mark: Mark | None = None            # the task its latest aclrtRecordEvent queued
    capture: Capture | None = None      # the capture that recorded it, if any
    time: float | None = None


class Mark:
    """The task aclrtRecordEvent queues: its event is complete once it has run."""

    def __init__(self, event: Event):
        self.event = event

    def __call__(self):
        if self.event.mark is self:     # a later record replaced it: it no longer counts
            self.event.time = time.perf_counter()


@dataclass(eq=False)
class Model:
    """An aclmdlRI made by capture: the recorded tasks, replayed by aclmdlRIExecuteAsync."""
    tasks: list[Callable[[], None]]
    device: int
    work: list[dict] = field(default_factory=list)   # what each replay runs (cost.py)


class ModelEnd:
    """Queued after a model's tasks: while one is queued the model is running."""

    def __init__(self, model: Model):
        self.model = model

    def __call__(self):
        pass


def get_stream(ptr, what: str, code: int | None = None) -> Stream:
    """A live stream; NULL is the default stream of the calling thread's device (acl_rt.h:
    where an aclrtStream is taken, NULL stands for the default stream)."""
    if ptr == ffi.NULL:
        d = need_device(what)
        if d not in STATE.default_streams:
            STATE.default_streams[d] = Stream(device=d)
        return STATE.default_streams[d]
    return STATE.streams.get(ptr, what, code)


def enqueue(s: Stream, task: Callable[[], None]) -> None:
    """Queue work on a stream, or record it in the stream's capture."""
    (s.capture.tasks if s.capture is not None else s.queue).append(task)


def run_stream(s: Stream, until: Callable | None = None) -> None:
    """Execute the queued work in order (up to and including the task `until`); the
    first failure empties the stream."""
    while s.queue:
        task = s.queue.popleft()
        try:
            task()
        except Exception as e:
            s.queue.clear()
            if isinstance(e, SimError) and e.code == lib.ACL_ERROR_RT_AICORE_EXCEPTION:
                raise      # a failure of the stream this one waited for
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION, f"task failed on the stream: {e}") from e
        if task is until:
            return


def queued_on(task) -> Stream | None:
    """The stream whose queue holds `task` (a Mark; a model replays the same ones)."""
    for s in STATE.streams.objects.values():
        if any(t is task for t in s.queue):
            return s
    return None


def refuse_in_capture(capture: Capture, code: int, message: str):
    """Capture rules (hicann/runtime dev_guide 04-01, single-stream capture): querying or
    synchronising a capturing stream, its events, its device or context is illegal in
    every mode, and an unsafe call "fails the capture": the capture is invalidated, so
    aclmdlRICaptureEnd refuses it (ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)."""
    capture.invalid = capture.invalid or message
    return SimError(code, message)
