"""The CANN backend's error type and the message buffers its native calls fill."""
from __future__ import annotations

from cannops.backend.base import DeviceError
from cannops.native._aclnn import ffi


class CANNError(DeviceError):
    """An ACL / aclnn call failed: its return code and aclGetRecentErrMsg's text."""

    def __init__(self, code: int, message: str):
        super().__init__(f"error {code}: {message}" if str(code) not in message else message)
        self.code = code


def err_buffer():
    return ffi.new("char[]", 2048)


def err_text(buf) -> str:
    return ffi.string(buf).decode(errors="replace")
