"""Exception classes for errors raised by the C core.

The C side maps each rs_* return code to one class here (csrc/python/py_common.c); the message
names the failing C function and the detail the C code filled in. Every instance carries `.code`,
the rs_* code. Classes also derive from the closest builtin so ordinary `except ValueError` works.
"""


class RecbenchError(Exception):
    """Base of every recbench error."""

    code = None


class InvalidArgument(RecbenchError, ValueError):
    """A bad argument or input; the message names it (RS_EINVAL)."""


class OutOfMemory(RecbenchError, MemoryError):
    """An allocation failed (RS_ENOMEM)."""


class NotFound(RecbenchError, KeyError):
    """A key or object does not exist (RS_ENOTFOUND)."""

    def __str__(self):  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class CapacityError(RecbenchError):
    """An index or store reached its capacity; the message names the capacity and index (RS_EFULL)."""


class IOFailure(RecbenchError, OSError):
    """File or socket I/O failed (RS_EIO)."""


class NotSupported(RecbenchError):
    """The engine, transport or build does not support the operation (RS_ENOTSUP)."""


class Timeout(RecbenchError, TimeoutError):
    """A deadline passed (RS_ETIMEDOUT)."""


class ConnectionFailed(RecbenchError, ConnectionError):
    """Connection refused, reset or closed by the peer (RS_ECONN)."""


class ProtocolError(RecbenchError):
    """Malformed bytes from the network or a file (RS_EPROTO)."""


class ServerError(RecbenchError):
    """The server answered with an error status (RS_ESERVER)."""


class ClosedError(RecbenchError):
    """The handle was already closed (RS_ECLOSED)."""


class Busy(RecbenchError):
    """A resource is in use: a port bound, a slot taken (RS_EBUSY)."""


class AlreadyExists(RecbenchError):
    """Already exists (RS_EEXIST)."""


class DeviceUnavailable(RecbenchError):
    """A required device is absent, e.g. no RDMA verbs device: a skip, not a failure (RS_ENODEV)."""


class VerificationError(RecbenchError):
    """Data verification failed (RS_EVERIFY)."""


class Interrupted(RecbenchError):
    """Stopped by a stop request (RS_EINTR)."""
