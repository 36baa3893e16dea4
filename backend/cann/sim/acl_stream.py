"""Entry points for streams, events and stream capture: creating and synchronising streams,
recording and waiting for events, and capturing a stream's work into a model run instance
(aclmdlRI) that aclmdlRIExecuteAsync replays."""
from __future__ import annotations

import threading

from .binding import ffi, lib

from .entries import entry
from .refusals import SimError
from .state import STATE, need_device
from .streams import (Capture, Event, Mark, Model, ModelEnd, Stream, enqueue, get_stream, queued_on,
                      refuse_in_capture, run_stream)


@entry
def aclrtCreateStream(stream):
    d = need_device("aclrtCreateStream")
    stream[0] = ffi.cast("void *", STATE.streams.new(Stream(d)))
    return 0


@entry
def aclrtDestroyStream(stream):
    s = STATE.streams.get(stream, "aclrtDestroyStream")
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED,
                       "aclrtDestroyStream: the stream is capturing (aclmdlRICaptureEnd first)")
    STATE.streams.pop(stream, "aclrtDestroyStream")
    if s.queue:   # destroying a stream does not run its work: the caller forgot a sync
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"aclrtDestroyStream: {len(s.queue)} task(s) queued and never synchronised")
    return 0


@entry
def aclrtSynchronizeStream(stream):
    s = get_stream(stream, "aclrtSynchronizeStream", lib.ACL_ERROR_INVALID_PARAM)
    if s.capture is not None:
        raise refuse_in_capture(s.capture, lib.ACL_ERROR_RT_STREAM_CAPTURED,
                                 "aclrtSynchronizeStream: the stream is capturing")
    run_stream(s)
    return 0


@entry
def aclrtSynchronizeDevice():
    """Run every stream of the calling thread's device (the first failure is returned,
    after the other streams ran)."""
    d = need_device("aclrtSynchronizeDevice")
    streams = [s for s in STATE.streams.objects.values() if s.device == d]
    streams += [s for s in STATE.default_streams.values() if s.device == d]
    capturing = [s for s in streams if s.capture is not None]
    if capturing:
        for s in capturing:
            refuse_in_capture(s.capture, 0, "aclrtSynchronizeDevice during the capture")
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED,
                       f"aclrtSynchronizeDevice: {len(capturing)} stream(s) of device {d} capturing")
    first = None
    for s in streams:
        try:
            run_stream(s)
        except SimError as e:
            first = first or e
    if first is not None:
        raise first
    return 0


@entry
def aclrtCreateEvent(event):
    need_device("aclrtCreateEvent")
    event[0] = ffi.cast("void *", STATE.events.new(Event()))
    return 0


EVENT_FLAGS = 0x1 | 0x2 | 0x8 | 0x10 | 0x20    # ACL_EVENT_SYNC ... ACL_EVENT_EXTERNAL


@entry
def aclrtCreateEventWithFlag(event, flag):
    """Flags as aclrtCreateEventWithFlag's doc lists them, OR-ed; ACL_EVENT_EXTERNAL
    (capture task update) goes alone, and is not simulated."""
    need_device("aclrtCreateEventWithFlag")
    if event == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: event is nullptr")
    flag = int(flag)
    if flag & ~EVENT_FLAGS:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"aclrtCreateEventWithFlag: unknown flag bits {flag & ~EVENT_FLAGS:#x}")
    if flag & lib.ACL_EVENT_EXTERNAL:
        if flag != lib.ACL_EVENT_EXTERNAL:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                           "aclrtCreateEventWithFlag: ACL_EVENT_EXTERNAL takes no other flag")
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       "aclrtCreateEventWithFlag: ACL_EVENT_EXTERNAL (capture task update) is not simulated")
    event[0] = ffi.cast("void *", STATE.events.new(Event(flag)))
    return 0


@entry
def aclrtDestroyEvent(event):
    STATE.events.pop(event, "aclrtDestroyEvent")
    return 0


@entry
def aclrtRecordEvent(event, stream):
    e = STATE.events.get(event, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    s = get_stream(stream, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    e.mark, e.capture, e.time = Mark(e), s.capture, None
    enqueue(s, e.mark)
    return 0


def _captured(e: Event) -> bool:
    return e.capture is not None and e.capture.active


@entry
def aclrtSynchronizeEvent(event):
    """Run the work queued before the event's record (on whichever stream holds it)."""
    e = STATE.events.get(event, "aclrtSynchronizeEvent", lib.ACL_ERROR_INVALID_PARAM)
    if _captured(e):
        raise refuse_in_capture(e.capture, lib.ACL_ERROR_RT_EVENT_CAPTURED,
                                 "aclrtSynchronizeEvent: the event was recorded in a capture")
    s = queued_on(e.mark) if e.mark is not None else None
    if s is not None:
        run_stream(s, until=e.mark)
    return 0


@entry
def aclrtStreamWaitEvent(stream, event):
    """The stream's later work runs after the work queued before the event's latest
    record (not a later one: its doc). In the simulator's model, where work runs at
    synchronisation, the wait is a task that first runs the recording stream up to the
    record. An event from aclrtCreateEventWithFlag without ACL_EVENT_SYNC cannot be
    waited for (its doc). A wait that would join a second stream to a capture
    (cross-stream capture) is not simulated."""
    what = "aclrtStreamWaitEvent"
    s = get_stream(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    e = STATE.events.get(event, what, lib.ACL_ERROR_INVALID_PARAM)
    if e.flags is not None and not e.flags & lib.ACL_EVENT_SYNC:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: the event was created without ACL_EVENT_SYNC (flags {e.flags:#x})")
    mark = e.mark
    if mark is None:            # never recorded: nothing to wait for
        return 0
    if s.capture is not None or _captured(e):
        if s.capture is not None and e.capture is s.capture:
            return 0            # recorded earlier in this same capture: already in order
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: cross-stream capture (an event wait linking a capturing "
                       "stream with another stream) is not simulated")

    def wait():
        src = queued_on(mark)
        if src is not None and src is not s:
            run_stream(src, until=mark)
    enqueue(s, wait)
    return 0


@entry
def aclrtEventElapsedTime(ms, start, end):
    a = STATE.events.get(start, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    b = STATE.events.get(end, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    for ev in (a, b):    # aclrtCreateEventWithFlag's doc: only ACL_EVENT_TIME_LINE records time
        if ev.flags is not None and not ev.flags & lib.ACL_EVENT_TIME_LINE:
            raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                           "aclrtEventElapsedTime: an event was created without "
                           f"ACL_EVENT_TIME_LINE (flags {ev.flags:#x}): it records no time")
    if a.time is None or b.time is None:
        raise SimError(lib.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                       "aclrtEventElapsedTime: an event has not completed (synchronise it first)")
    ms[0] = (b.time - a.time) * 1e3
    return 0


# stream capture into a model run instance (hicann/runtime api_ref 15 and dev_guide
# 04-01): between aclmdlRICaptureBegin and aclmdlRICaptureEnd the stream's work is
# recorded, not queued; aclmdlRIExecuteAsync queues it again, as often as asked, and it
# reads device memory when it runs. Followed from 04-01: synchronising the capturing
# stream, its events or its device is illegal in every mode, aclrtMemcpy / aclrtMemset
# in GLOBAL (any thread) and THREAD_LOCAL (the capturing thread) modes; either fails
# the capture. The docs forbid no allocation during a capture: aclrtMalloc / aclrtFree
# and the virtual memory calls are taken.

@entry
def aclmdlRICaptureBegin(stream, mode):
    what = "aclmdlRICaptureBegin"
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    if mode not in (lib.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, lib.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
                    lib.ACL_MODEL_RI_CAPTURE_MODE_RELAXED):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: mode {mode}")
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED, f"{what}: the stream is capturing already")
    s.capture = Capture(int(mode), threading.get_ident())
    return 0


@entry
def aclmdlRICaptureEnd(stream, model_ri):
    """The capture ends (whatever it answers); a capture an illegal call failed gives
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED and no model. Outside RELAXED mode, the
    thread that began it must end it (ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD)."""
    what = "aclmdlRICaptureEnd"
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    c = s.capture
    if c is None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"{what}: the stream is not capturing")
    if c.mode != lib.ACL_MODEL_RI_CAPTURE_MODE_RELAXED and c.thread != threading.get_ident():
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                       f"{what}: another thread began the capture")
    if model_ri == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: modelRI is nullptr")
    s.capture, c.active = None, False
    if c.invalid:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                       f"{what}: the capture failed: {c.invalid}")
    model_ri[0] = ffi.cast("void *", STATE.models.new(Model(c.tasks, s.device, c.work)))
    return 0


@entry
def aclmdlRIExecuteAsync(model_ri, stream):
    what = "aclmdlRIExecuteAsync"
    m = STATE.models.get(model_ri, what, lib.ACL_ERROR_RT_INVALID_HANDLE)
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: executing a model into a capture is not simulated")
    s.queue += m.tasks
    s.queue.append(ModelEnd(m))
    return 0


@entry
def aclmdlRIDestroy(model_ri):
    """A model still queued to run cannot go (ACL_ERROR_RT_MODEL_RUNNING, its meaning in
    the aclError table): synchronise first."""
    what = "aclmdlRIDestroy"
    m = STATE.models.get(model_ri, what, lib.ACL_ERROR_RT_INVALID_HANDLE)
    for s in STATE.streams.objects.values():
        if any(isinstance(t, ModelEnd) and t.model is m for t in s.queue):
            raise SimError(lib.ACL_ERROR_RT_MODEL_RUNNING,
                           f"{what}: the model is queued on a stream (synchronise it first)")
    STATE.models.pop(model_ri, what)
    return 0
