"""TensorHandle: a possibly-future tensor plus its metadata and device (docs/eager.md).

A TensorHandle is what core-runtime ops take and return.  It holds

* the **tensor**: an AsyncValue of a host tensor (see :mod:`.host_tensors` for the stored
  forms), which may still be unavailable or be an error;
* the **metadata** (dtype + shape): usually available at once (computed by the op's metadata
  function before the op runs); otherwise an AsyncValue that is available no later than the
  tensor;
* the **device** name (``"CPU:0"`` for every handle made by the CPU op handler).

Fast representation: a handle whose tensor is already available keeps the tensor in ``_t`` and
creates no AsyncValue until :attr:`tensor_av` is asked for; its metadata is derived from the
tensor on demand.  This keeps the eager fast path to one object allocation per result.

Value semantics: handles are immutable once built (the tensor AV is filled by its producer);
they may be shared between threads.  Reading ``_t``/``_av`` is lock-free: a handle's fields
never change after construction except that ``_av``/``_md`` may be filled lazily with values
that are equivalent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from pytfrt.core_runtime.host_tensors import format_tensor, make_metadata, metadata_of
from pytfrt.host.async_value import AsyncValue, make_available, make_error
from pytfrt.support.errors import PytfrtError, Status
from pytfrt.tensor.shape import TensorMetadata

CPU_DEVICE: Final = "CPU:0"

_new = object.__new__


class TensorHandleError(PytfrtError):
    """Reading the tensor or metadata of a handle that is not available, or is an error."""


class TensorHandle:
    """(device, metadata, tensor AsyncValue); see the module docstring.

    Args:
        metadata: a :class:`TensorMetadata`, an AsyncValue of one, or ``None`` (derived from
            the tensor when it becomes available).
        tensor: an AsyncValue of the tensor.
        device: the device name.
    """

    __slots__ = ("_t", "_av", "_md", "_device")

    def __init__(
        self,
        metadata: TensorMetadata | AsyncValue[TensorMetadata] | None,
        tensor: AsyncValue[Any],
        device: str = CPU_DEVICE,
    ) -> None:
        self._t: Any = tensor._value if tensor.is_concrete() else None
        self._av: AsyncValue[Any] | None = tensor
        self._md: Any = metadata
        self._device = device

    # -- construction helpers ------------------------------------------------------------

    @staticmethod
    def from_tensor(tensor: Any, device: str = CPU_DEVICE) -> TensorHandle:
        """An available handle holding ``tensor`` (an ndarray or a host tensor object)."""
        h: TensorHandle = _new(TensorHandle)
        h._t = tensor
        h._av = None
        h._md = None
        h._device = device
        return h

    @staticmethod
    def from_error(error: Status | str, device: str = CPU_DEVICE) -> TensorHandle:
        """A handle whose tensor and metadata are the error ``error``."""
        av = make_error(error)
        return TensorHandle(av, av, device)

    # -- state ----------------------------------------------------------------------------

    @property
    def device(self) -> str:
        """The device name (e.g. ``CPU:0``)."""
        return self._device

    def is_available(self) -> bool:
        """True if the tensor is concrete or an error."""
        return self._t is not None or self._av is not None and self._av.is_available()

    def is_error(self) -> bool:
        """True if the tensor is an error."""
        return self._t is None and self._av is not None and self._av.is_error()

    @property
    def error(self) -> Status | None:
        """The tensor's error status, or ``None``."""
        if self._t is not None or self._av is None:
            return None
        return self._av.get_error_or_none()

    @property
    def tensor_av(self) -> AsyncValue[Any]:
        """The tensor's AsyncValue (created on first use for handles made available)."""
        av = self._av
        if av is None:
            av = make_available(self._t)
            self._av = av
        return av

    def get_tensor(self) -> Any:
        """The tensor payload.

        Raises:
            TensorHandleError: if the tensor is an error or not available yet.
        """
        t = self._t
        if t is not None:
            return t
        av = self._av
        assert av is not None
        if av.is_concrete():
            return av._value
        if av.is_error():
            raise TensorHandleError(av.error.message)
        raise TensorHandleError("the tensor of this TensorHandle is not available yet")

    def and_then(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once the tensor is available (at once if it already is)."""
        if self._t is not None:
            callback()
        else:
            self.tensor_av.and_then(callback)

    # -- metadata -------------------------------------------------------------------------

    def is_metadata_available(self) -> bool:
        """True if the metadata (or its error) is known."""
        md = self._md
        if md is None:
            return self.is_available()
        if isinstance(md, AsyncValue):
            return md.is_available()
        return True

    @property
    def metadata(self) -> TensorMetadata:
        """The dtype and shape.

        Raises:
            TensorHandleError: if the metadata is an error or not available yet.
        """
        md = self._md
        if type(md) is TensorMetadata:
            return md
        if md is None:
            if self._t is not None:
                md = metadata_of(self._t)
                self._md = md
                return md  # type: ignore[no-any-return]
            av = self._av
            assert av is not None
            if av.is_concrete():
                md = metadata_of(av._value)
                self._md = md
                return md  # type: ignore[no-any-return]
            if av.is_error():
                raise TensorHandleError(av.error.message)
            raise TensorHandleError("the metadata of this TensorHandle is not available yet")
        if md.is_concrete():
            return md.get()  # type: ignore[no-any-return]
        if md.is_error():
            raise TensorHandleError(md.error.message)
        raise TensorHandleError("the metadata of this TensorHandle is not available yet")

    def metadata_or_none(self) -> TensorMetadata | Status | None:
        """The metadata, its error status, or ``None`` if not known yet (never raises)."""
        md = self._md
        if type(md) is TensorMetadata:
            return md
        try:
            return self.metadata
        except TensorHandleError:
            pass
        if md is None:
            return self._av.get_error_or_none() if self._av is not None else None
        if isinstance(md, AsyncValue):
            return md.get_error_or_none()
        return None

    @property
    def dtype(self) -> Any:
        """The metadata's dtype (see :attr:`metadata`)."""
        return self.metadata.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The metadata's dimensions as a tuple (see :attr:`metadata`)."""
        return self.metadata.shape.dims

    # -- printing -------------------------------------------------------------------------

    def format(self) -> str:
        """TFRT's print of a handle (docs/conformance.md)."""
        if self._t is not None:
            return format_tensor(self._t)
        av = self._av
        assert av is not None
        if av.is_concrete():
            return format_tensor(av._value)
        if av.is_error():
            return f"Error TensorHandle: '{av.error.message}'"
        md = self._md
        if md is None or (isinstance(md, AsyncValue) and md.is_unavailable()):
            return "fully future TensorHandle with unresolved metadata"
        if isinstance(md, AsyncValue):
            if md.is_error():
                return f"future TensorHandle with error metadata '{md.error.message}'"
            md = md.get()
        return f"future TensorHandle with metadata {md.dtype.name} {md.shape}"

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"<TensorHandle {self.format()}>"


def make_handle_metadata(dtype: Any, dims: tuple[int, ...]) -> TensorMetadata:
    """Shorthand for :func:`.host_tensors.make_metadata` (re-exported for op authors)."""
    return make_metadata(dtype, dims)
