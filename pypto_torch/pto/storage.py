"""``torch.pto.FloatStorage`` and the other legacy typed-storage classes, as
``torch.cuda`` has them: ``tensor.storage_type()`` of a pto tensor names one, and
``isinstance(tensor.storage(), torch.pto.FloatStorage)`` holds. One class per entry of
torch's own dtype-to-name table; torch reads the device from the classes' module."""

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _dtype_to_storage_type_map, _warn_typed_storage_removal


class _PtoLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args, **kwargs):
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for pto storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args, **kwargs):
        raise RuntimeError("_new_with_weak_ptr: Not available for pto storage")

    @classmethod
    def _new_shared_filename(cls, manager, obj, size, *, device=None, dtype=None):
        raise RuntimeError("_new_shared_filename: Not available for pto storage")


def _storage_class(name: str, dtype: torch.dtype) -> type:
    def public_dtype(cls):
        _warn_typed_storage_removal()
        return cls._dtype

    return type(name, (_PtoLegacyStorage,), {
        "__module__": "torch.pto",  # the device torch gives the class's storages
        "dtype": classproperty(public_dtype),
        "_dtype": classproperty(lambda cls: dtype),
    })


STORAGE_CLASSES = {name: _storage_class(name, dtype) for dtype, name in _dtype_to_storage_type_map().items()}
torch._storage_classes.update(STORAGE_CLASSES.values())
