"""save / load in PyTorch 1.13's checkpoint format, and pickling of tensors.

A checkpoint is a zip archive (stored, not compressed) whose records all sit
under one folder (``archive/`` for file objects, the file's name without its
extension for paths):

- ``data.pkl``: the object, pickled (protocol 2) with every tensor written as
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  requires_grad, OrderedDict())`` and every storage as the persistent id
  ``('storage', torch.<Type>Storage, key, 'cpu', numel)``;
- ``data/<key>``: each storage's raw bytes (little-endian), written once even
  when several tensors view it, so views stay views after loading;
- ``version``: ``3``.

PyTorch loads what ``save`` writes and ``load`` reads what ``torch.save``
writes.  Names of the ``torch`` module in the pickle are mapped to jitgrad's
on load; any other ``torch`` object (a module class, a storage of a dtype
jitgrad lacks) is an error naming it.
"""
import collections
import copy
import copyreg
import io
import os
import pickle
import struct
import weakref
import zipfile

from . import _C
from ._C import Tensor

__all__ = ["save", "load"]

# jitgrad dtype name -> the storage class PyTorch pickles for it
_STORAGE_OF = {
    "float32": "FloatStorage",
    "float64": "DoubleStorage",
    "int64": "LongStorage",
    "int32": "IntStorage",
    "bool": "BoolStorage",
}
_DTYPE_OF = {v: k for k, v in _STORAGE_OF.items()}
# PyTorch storages jitgrad has no dtype for (loading one is an error naming it)
_UNSUPPORTED_STORAGES = {
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "ByteStorage": "uint8",
    "CharStorage": "int8",
    "ShortStorage": "int16",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "QInt8Storage": "qint8",
    "QUInt8Storage": "quint8",
    "QInt32Storage": "qint32",
    "UntypedStorage": "untyped",
}
_TORCH_DTYPES = ("float32", "float64", "int64", "int32", "bool")
_TORCH_DTYPE_ALIASES = {"float": "float32", "double": "float64", "long": "int64", "int": "int32"}
_CUDA_ERROR = (
    "Attempting to deserialize object on a CUDA device but jitgrad.cuda.is_available() is "
    "False. If you are running on a CPU-only machine, please use jitgrad.load with "
    "map_location=jitgrad.device('cpu') to map your storages to the CPU."
)


def _dtype(name):
    return getattr(_C, name)


def _parameter_class():
    """nn.Parameter when jitgrad has one (a Tensor subclass), else None."""
    from . import nn

    p = getattr(nn, "Parameter", None)
    return p if isinstance(p, type) and issubclass(p, Tensor) else None


# ------------------------------------------------------------------ writing


class _Global:
    """A name in the pickle (module, name) that jitgrad writes without
    importing it: torch need not be installed to write its format."""

    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module = module
        self.name = name

    def __call__(self, *args):  # pickle wants reduce functions callable; never called
        raise TypeError(f"{self.module}.{self.name} is a name in a checkpoint, not a function")


_REBUILD_TENSOR_V2 = _Global("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _Global("torch._utils", "_rebuild_parameter")
_DEVICE = _Global("torch", "device")
_ORDERED_DICT = collections.OrderedDict
_STORAGE_GLOBALS = {d: _Global("torch", s) for d, s in _STORAGE_OF.items()}


class _StorageRef:
    """One storage of the object being saved (a persistent id)."""

    __slots__ = ("key", "whole", "dtype_name", "numel")

    def __init__(self, key, whole, dtype_name, numel):
        self.key = key
        self.whole = whole  # a 1-D tensor over all of it: keeps it alive while saving
        self.dtype_name = dtype_name
        self.numel = numel


class _CheckpointPickler(pickle._Pickler):
    """The pure-Python pickler (its save_global can be bypassed for names
    that do not exist here, torch's), with tensors written as PyTorch's."""

    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, protocol):
        super().__init__(file, protocol)
        self.storages = {}  # storage address -> _StorageRef
        self.parameter_class = _parameter_class()
        from . import device

        self.device_class = device

    def _storage_ref(self, t):
        addr = t._storage_key()
        ref = self.storages.get(addr)
        dname = str(t.dtype).split(".")[-1]
        if ref is None:
            n = t._storage_nbytes() // t.element_size()
            whole = t._storage_view([n], [1], 0)
            ref = self.storages[addr] = _StorageRef(str(len(self.storages)), whole, dname, n)
        elif ref.dtype_name != dname:
            raise RuntimeError(
                "Cannot save multiple tensors or storages that view the same data as "
                "different types"
            )
        return ref

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            return ("storage", _STORAGE_GLOBALS[obj.dtype_name], obj.key, "cpu", obj.numel)
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            if self.parameter_class is not None and isinstance(obj, self.parameter_class):
                data = obj.detach()
                return (_REBUILD_PARAMETER, (data, obj.requires_grad, _ORDERED_DICT()))
            ref = self._storage_ref(obj)
            args = (ref, obj.storage_offset(), tuple(obj.shape), tuple(obj.stride()),
                    obj.requires_grad, _ORDERED_DICT())
            return (_REBUILD_TENSOR_V2, args)
        if isinstance(obj, self.device_class):
            return (_DEVICE, ("cpu",))
        return NotImplemented

    def _save_name(self, module, name):
        if self.proto >= 4:
            self.save(module)
            self.save(name)
            self.write(pickle.STACK_GLOBAL)
        else:
            self.write(pickle.GLOBAL + module.encode("utf-8") + b"\n" + name.encode("utf-8")
                       + b"\n")

    def _save_global_stub(self, obj):
        self._save_name(obj.module, obj.name)
        self.memoize(obj)

    def _save_dtype(self, obj):
        self._save_name("torch", str(obj).split(".")[-1])
        self.memoize(obj)

    dispatch[_Global] = _save_global_stub
    dispatch[_C.dtype] = _save_dtype


def _archive_name(f):
    if isinstance(f, (str, os.PathLike)):
        base = os.path.basename(os.fspath(f))
        stem = base.rsplit(".", 1)[0] if "." in base else base
        return stem or "archive"
    return "archive"


def _write_record(zf, name, data):
    """A stored record whose data starts at a multiple of 64 bytes, as
    PyTorch's writer aligns them (padding in an 'FB' extra field)."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    try:
        start = zf.fp.tell()
    except (AttributeError, OSError):
        start = None
    if start is not None:
        header = 30 + len(name.encode("utf-8")) + 4
        pad = (-(start + header)) % 64
        info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
    zf.writestr(info, data)


def save(obj, f, pickle_module=pickle, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """save(obj, f, pickle_module=pickle, pickle_protocol=2)

    Saves obj (tensors, and containers, state_dicts, numbers, strings... that
    hold them) to f, a path or a binary file object, in PyTorch 1.13's zip
    checkpoint format: ``torch.load`` reads it.  Tensors sharing memory
    (views) are saved with one copy of it and load as views again.  Only
    the zip format is written (``_use_new_zipfile_serialization=False`` is an
    error)."""
    if not _use_new_zipfile_serialization:
        raise RuntimeError("jitgrad.save writes only the zip checkpoint format "
                           "(_use_new_zipfile_serialization=True)")
    if pickle_module is not pickle:
        raise RuntimeError("jitgrad.save supports only the standard pickle module")
    if pickle_protocol < 2:
        raise ValueError("jitgrad.save needs pickle_protocol >= 2 (tensors are saved through "
                         "persistent ids)")
    buf = io.BytesIO()
    pickler = _CheckpointPickler(buf, pickle_protocol)
    pickler.dump(obj)
    prefix = _archive_name(f) + "/"
    own = isinstance(f, (str, os.PathLike))
    fh = open(f, "wb") if own else f
    try:
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            _write_record(zf, prefix + "data.pkl", buf.getvalue())
            refs = {r.key: r for r in pickler.storages.values()}
            for key in sorted(refs):  # PyTorch's order: keys sorted as strings
                _write_record(zf, prefix + "data/" + key, refs[key].whole._storage_bytes())
            _write_record(zf, prefix + "version", b"3\n")
    finally:
        if own:
            fh.close()


# ------------------------------------------------------------------ reading


class _StorageType:
    """What ``torch.<Type>Storage`` means in a pickle being loaded."""

    def __init__(self, name):
        self.name = name

    @property
    def dtype_name(self):
        d = _DTYPE_OF.get(self.name)
        if d is None:
            what = _UNSUPPORTED_STORAGES.get(self.name, self.name)
            raise RuntimeError(f"jitgrad.load: the checkpoint holds a torch.{self.name} "
                               f"(dtype {what}), which jitgrad does not support; convert it "
                               "with PyTorch first (e.g. .float() or .long())")
        return d


def _rebuild_tensor(storage, storage_offset, size, stride):
    return storage._storage_view(list(size), list(stride), storage_offset)


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks,
                       metadata=None):
    t = _rebuild_tensor(storage, storage_offset, size, stride)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    """A Parameter when jitgrad.nn has one; else the tensor itself with
    requires_grad as saved."""
    cls = _parameter_class()
    if cls is not None:
        return cls(data, requires_grad)
    data.requires_grad_(bool(requires_grad))
    return data


def _torch_global(module, name):
    if module == "torch._utils":
        if name == "_rebuild_tensor_v2":
            return _rebuild_tensor_v2
        if name == "_rebuild_tensor":
            return _rebuild_tensor
        if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return _rebuild_parameter
    elif module == "torch":
        if name.endswith("Storage"):
            return _StorageType(name)
        name = _TORCH_DTYPE_ALIASES.get(name, name)
        if name in _TORCH_DTYPES:
            return _dtype(name)
        if name == "Size":
            return tuple
        if name == "device":
            from . import device

            return device
    raise pickle.UnpicklingError(f"jitgrad.load cannot rebuild {module}.{name}: it has no "
                                 "jitgrad counterpart")


# what weights_only=True lets a checkpoint name besides torch's tensor pieces
_SAFE_GLOBALS = {
    ("collections", "OrderedDict"),
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "slice"),
    ("builtins", "complex"),
    ("builtins", "bytearray"),
}


class _CheckpointUnpickler(pickle.Unpickler):
    def __init__(self, file, read_storage, map_location, weights_only, **kwargs):
        super().__init__(file, **kwargs)
        self.read_storage = read_storage
        self.map_location = map_location
        self.weights_only = weights_only
        self.loaded = {}

    def find_class(self, module, name):
        if module == "torch" or module.startswith("torch."):
            return _torch_global(module, name)
        if self.weights_only and (module, name) not in _SAFE_GLOBALS:
            raise pickle.UnpicklingError(f"Weights only load failed: unsupported global "
                                         f"{module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            raise pickle.UnpicklingError(f"jitgrad.load: unknown persistent id {pid!r}")
        _, storage_type, key, location, numel = pid
        t = self.loaded.get(key)
        if t is None:
            if not isinstance(storage_type, _StorageType):
                raise pickle.UnpicklingError(f"jitgrad.load: bad storage type {storage_type!r}")
            t = _C._storage_from_bytes(self.read_storage(key), _dtype(storage_type.dtype_name))
            t = _map_location(t, str(location), self.map_location)
            self.loaded[key] = t
        return t


def _is_cpu(loc):
    return str(loc).split(":")[0] == "cpu"


def _map_location(storage, location, map_location):
    if map_location is None:
        target = location
    elif callable(map_location) and not isinstance(map_location, (str, dict)):
        r = map_location(storage, location)
        if r is not None:
            return r
        target = location
    elif isinstance(map_location, dict):
        target = str(map_location.get(location, location))
    else:
        target = str(map_location)
    if not _is_cpu(target):
        if target.startswith("cuda"):
            raise RuntimeError(_CUDA_ERROR)
        raise RuntimeError(f"jitgrad.load: cannot map storages to device '{target}': jitgrad "
                           "runs on the CPU only")
    return storage


def _read_all(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            return fh.read()
    if isinstance(f, (bytes, bytearray, memoryview)):
        raise TypeError("jitgrad.load expects a path or a binary file object, not bytes; wrap "
                        "them in io.BytesIO")
    data = f.read()
    if isinstance(data, str):
        raise TypeError("jitgrad.load needs a file opened in binary mode ('rb')")
    return data


def load(f, map_location=None, pickle_module=None, *, weights_only=False, **pickle_load_args):
    """load(f, map_location=None, pickle_module=None, *, weights_only=False)

    Loads an object saved by ``jitgrad.save`` or by ``torch.save`` (PyTorch's
    zip checkpoint format; float32, float64, int64, int32 and bool tensors)
    from f, a path or a binary file object.  Tensors that shared memory when
    saved share it again; ``nn.Parameter`` entries load as Parameters (as
    tensors requiring grad while jitgrad has no Parameter).  map_location
    may be None, 'cpu', a device, a dict or a callable, as in PyTorch; any
    device but the CPU is an error.  weights_only=True refuses globals other
    than tensors, dtypes and plain containers."""
    if pickle_module is not None and pickle_module is not pickle:
        raise RuntimeError("jitgrad.load supports only the standard pickle module")
    data = _read_all(f)
    if not data.startswith(b"PK\x03\x04"):
        if data[:2] == b"\x80\x02" or data[:1] == b"\x80":
            raise RuntimeError(
                "jitgrad.load: this file is in PyTorch's legacy (pre-1.6, non-zip) format, "
                "which jitgrad does not read; save it again with torch.save's default "
                "(_use_new_zipfile_serialization=True)"
            )
        raise pickle.UnpicklingError("jitgrad.load: not a checkpoint (expected a zip archive "
                                     "written by torch.save or jitgrad.save)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as e:
        raise RuntimeError(f"jitgrad.load: the checkpoint is damaged ({e})") from None
    with zf:
        names = zf.namelist()
        pkl = [n for n in names if n.count("/") == 1 and n.endswith("/data.pkl")]
        if len(pkl) != 1:
            raise RuntimeError("jitgrad.load: the archive has no <name>/data.pkl record: not a "
                               "PyTorch checkpoint")
        prefix = pkl[0][: -len("data.pkl")]
        if prefix + "version" in names:
            v = zf.read(prefix + "version").strip()
            if not v.isdigit() or int(v) > 10:
                raise RuntimeError(f"jitgrad.load: unsupported checkpoint version {v!r}")
        order = prefix + "byteorder"  # written by later PyTorch versions only
        if order in names and zf.read(order).strip() != b"little":
            raise RuntimeError("jitgrad.load: the checkpoint was written big-endian, which "
                               "jitgrad does not read")

        def read_storage(key):
            try:
                return zf.read(prefix + "data/" + key)
            except KeyError:
                raise RuntimeError(f"jitgrad.load: the checkpoint lacks the record data/{key}") \
                    from None

        up = _CheckpointUnpickler(io.BytesIO(zf.read(pkl[0])), read_storage, map_location,
                                  weights_only, **pickle_load_args)
        return up.load()


# ------------------------------------------------------------------ pickle and deepcopy


class _PickledStorage:
    """The storage of tensors being pickled: one object per storage (found
    again through a weak cache while the pickler's memo holds it), so that
    tensors sharing memory unpickle sharing it."""

    __slots__ = ("whole", "__weakref__")

    def __init__(self, whole):
        self.whole = whole

    def __reduce__(self):
        return (_storage_from_bytes, (self.whole._storage_bytes(), str(self.whole.dtype)))


_pickled_storages = weakref.WeakValueDictionary()


def _storage_from_bytes(data, dtype_name):
    return _C._storage_from_bytes(data, _dtype(dtype_name.split(".")[-1]))


def _whole(t):
    return t._storage_view([t._storage_nbytes() // t.element_size()], [1], 0)


def _tensor_reduce_ex(self, protocol):
    if type(self) is not Tensor:
        cls = _parameter_class()
        if cls is not None and isinstance(self, cls):
            return (_rebuild_parameter, (self.detach(), self.requires_grad, None))
    key = self._storage_key()
    st = _pickled_storages.get(key)
    if st is None or st.whole.dtype != self.dtype:
        st = _PickledStorage(_whole(self))
        _pickled_storages[key] = st
    return (_rebuild_from_pickle, (st, self.storage_offset(), tuple(self.shape),
                                   tuple(self.stride()), self.requires_grad))


def _rebuild_from_pickle(storage, offset, size, stride, requires_grad):
    if isinstance(storage, _PickledStorage):  # copy.copy: shares the memory, as PyTorch's
        storage = storage.whole
    t = storage._storage_view(list(size), list(stride), offset)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _tensor_deepcopy(self, memo):
    if not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                           "the deepcopy protocol at the moment")
    if id(self) in memo:
        return memo[id(self)]
    skey = ("jitgrad.storage", self._storage_key())
    storage = memo.get(skey)
    if storage is None or storage.dtype != self.dtype:
        storage = _C._storage_from_bytes(self._storage_bytes(), self.dtype)
        memo[skey] = storage
    t = storage._storage_view(list(self.shape), list(self.stride()), self.storage_offset())
    if type(self) is not Tensor:
        cls = _parameter_class()
        if cls is not None and isinstance(self, cls):
            t = cls(t, self.requires_grad)
    elif self.requires_grad:
        t.requires_grad_(True)
    memo[id(self)] = t
    if self.grad is not None:
        t.grad = copy.deepcopy(self.grad, memo)
    return t


def _dtype_reduce(self):
    return (_dtype, (str(self).split(".")[-1],))


Tensor.__reduce_ex__ = _tensor_reduce_ex
Tensor.__deepcopy__ = _tensor_deepcopy
copyreg.pickle(_C.dtype, _dtype_reduce)
