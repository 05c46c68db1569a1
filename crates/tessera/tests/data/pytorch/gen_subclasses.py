"""Writes the tensor-subclass checkpoints: what torch 2.x's `torch.save` writes for
parameters with Python state, tensor subclasses and tensors carrying attributes.

torch is not installed here (Debian's python3-torch is 1.13; torch 2.x wheels are
gigabytes), so these are hand-built the way torch builds them: the real `pickle`
module's Pickler (protocol 2, as torch.save) with torch's `persistent_id` for storages,
over stand-in objects whose `__reduce_ex__` returns the tuples torch 2.x's
`Tensor.__reduce_ex__` / `Parameter.__reduce_ex__` return:
- a tensor: `torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
  requires_grad, OrderedDict())`, the storage a persistent id
  `('storage', torch.FloatStorage, key, 'cpu', numel)`;
- a parameter: `_rebuild_parameter(data, requires_grad, OrderedDict())`, or, when
  `torch._utils._get_obj_state(param)` is truthy, `_rebuild_parameter_with_state(data,
  requires_grad, OrderedDict(), state)` (state `(__dict__, slots)` from a subclass
  with `__slots__`, so `({}, {})` when none are set);
- a tensor subclass or a tensor with attributes: `torch._tensor._rebuild_from_type_v2(
  _rebuild_tensor_v2, type(t), args, state)`.
The stand-in modules `torch`, `torch._utils`, `torch._tensor`, `torch.nn.parameter`
exist only in this process's `sys.modules`, so pickle names the globals exactly as
torch's would be named. Records as torch.save lays them out (`archive/data.pkl`,
`archive/data/<key>`, `byteorder`, `version`).

Files:
- subclass_ok.pt: {plain, param, param_empty_state, from_type_tensor,
  from_type_param}: every tensor's values are `arange(6) + 10 * i` as float32, shape
  (2, 3), i the entry's position; readable.
- subclass_tensor.pt: a tensor subclass `__main__.ScaledTensor`: refused naming it.
- subclass_attrs.pt: a torch.Tensor with the attribute `scale`: refused naming it.
- subclass_param_attrs.pt: a Parameter with the attribute `frozen_at`: refused.

Run: python3 gen_subclasses.py (any Python 3 with numpy).
"""
import collections
import io
import pathlib
import pickle
import sys
import types
import zipfile

import numpy as np

HERE = pathlib.Path(__file__).parent


def module(name):
    m = types.ModuleType(name)
    sys.modules[name] = m
    return m


torch = module("torch")
t_utils = module("torch._utils")
t_tensor = module("torch._tensor")
module("torch.nn")
t_param = module("torch.nn.parameter")


def stand_in(mod, name, obj=None):
    """A function (or the class `obj`) that pickles as `mod.name`."""
    if obj is None:
        def obj(*a):
            raise RuntimeError("never called")
    obj.__module__, obj.__name__, obj.__qualname__ = mod.__name__, name, name
    setattr(mod, name, obj)
    return obj


_rebuild_tensor_v2 = stand_in(t_utils, "_rebuild_tensor_v2")
_rebuild_parameter = stand_in(t_utils, "_rebuild_parameter")
_rebuild_parameter_with_state = stand_in(t_utils, "_rebuild_parameter_with_state")
_rebuild_from_type_v2 = stand_in(t_tensor, "_rebuild_from_type_v2")
FloatStorage = stand_in(torch, "FloatStorage", type("FloatStorage", (), {}))
Tensor = stand_in(torch, "Tensor", type("Tensor", (), {}))
Parameter = stand_in(t_param, "Parameter", type("Parameter", (Tensor,), {}))


class ScaledTensor(Tensor):
    """A user's tensor subclass (pickled as `__main__.ScaledTensor`)."""


class Storage:
    def __init__(self, key, values):
        self.key, self.values = key, values


class T:
    """A float32 tensor over its own storage, reduced as torch 2.x reduces one."""

    def __init__(self, storage, cls=Tensor, state=None):
        self.storage, self.cls, self.state = storage, cls, state

    def args(self):
        return (self.storage, 0, (2, 3), (3, 1), False, collections.OrderedDict())

    def __reduce_ex__(self, proto):
        if self.cls is Tensor and not self.state:
            return _rebuild_tensor_v2, self.args()
        return _rebuild_from_type_v2, (_rebuild_tensor_v2, self.cls, self.args(), self.state)


class P:
    """A parameter, reduced as torch 2.x's `Parameter.__reduce_ex__`."""

    def __init__(self, data, state=None):
        self.data, self.state = data, state

    def __reduce_ex__(self, proto):
        args = (self.data, True, collections.OrderedDict())
        if not self.state:
            return _rebuild_parameter, args
        return _rebuild_parameter_with_state, args + (self.state,)


class Pickler(pickle.Pickler):
    def __init__(self, f, storages):
        super().__init__(f, protocol=2)
        self.storages = storages

    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            self.storages[obj.key] = obj.values
            return ("storage", FloatStorage, obj.key, "cpu", obj.values.size)
        return None


def save(name, obj):
    storages = {}
    buf = io.BytesIO()
    Pickler(buf, storages).dump(obj)
    with zipfile.ZipFile(HERE / name, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", b"little")
        for key, values in storages.items():
            z.writestr(f"archive/data/{key}", values.astype("<f4").tobytes())
        z.writestr("archive/version", b"3\n")


def storage(i):
    return Storage(str(i), np.arange(6, dtype=np.float32) + 10 * i)


def main():
    save("subclass_ok.pt", collections.OrderedDict([
        ("plain", T(storage(0))),
        ("param", P(T(storage(1)))),
        ("param_empty_state", P(T(storage(2)), state=({}, {}))),
        ("from_type_tensor", T(storage(3), cls=Tensor, state=({}, {}))),
        ("from_type_param", T(storage(4), cls=Parameter, state=None)),
    ]))
    save("subclass_tensor.pt", {"w": T(storage(0), cls=ScaledTensor)})
    save("subclass_attrs.pt", {"w": T(storage(0), state={"scale": 0.5})})
    save("subclass_param_attrs.pt", {"w": P(T(storage(0)), state={"frozen_at": 3})})


if __name__ == "__main__":
    main()
