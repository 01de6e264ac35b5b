"""Model state: naming tensors, loading state dicts (and their errors), safetensors files read by the reference
`safetensors` package."""
import json
import struct
import numpy as np
import pytest
from tinygrad_core import Tensor, dtypes
from tinygrad_core.nn import Linear, Conv2d, BatchNorm2d
from tinygrad_core.nn.state import get_state_dict, get_parameters, load_state_dict, safe_save, safe_load
from tinygrad_core.dtype import bf16_to_f32
from helpers import assert_close


class Net:
    def __init__(self):
        self.l1 = Linear(4, 3)
        self.blocks = [Conv2d(1, 2, 3), {"norm": BatchNorm2d(2)}]
        self.l2 = Linear(3, 2, bias=False)
        self.tied = self.l1           # the same layer under two names
        self.note = "not a tensor"


def test_state_dict_names_are_dotted_paths():
    net = Net()
    names = list(get_state_dict(net))
    assert names[:2] == ["l1.weight", "l1.bias"]
    assert "blocks.0.weight" in names and "blocks.1.norm.running_var" in names and "l2.weight" in names
    assert "l2.bias" not in names                       # None is not a tensor
    assert "tied.weight" in names                       # like PyTorch, a shared tensor appears under each name
    params = get_parameters(net)
    assert len(params) == len({id(p) for p in params}) == len(names) - 2
    assert get_parameters([Tensor([1.0]), (Tensor([2.0]),), {"a": Tensor([3.0])}]).__len__() == 3


def test_load_state_dict_copies_in_place():
    src, dst = Net(), Net()
    weight = dst.l1.weight
    load_state_dict(dst, get_state_dict(src))
    assert dst.l1.weight is weight
    for name, t in get_state_dict(src).items():
        assert_close(get_state_dict(dst)[name].numpy(), t.numpy(), what=name)


def test_load_state_dict_errors_name_the_key_and_shapes():
    net = Net()
    state = get_state_dict(Net())
    with pytest.raises(ValueError, match=r"'l1.weight' has shape \(3, 5\) in the state dict but \(3, 4\) in the model"):
        load_state_dict(net, {**state, "l1.weight": Tensor.zeros(3, 5)})
    missing = {k: v for k, v in state.items() if k != "l2.weight"}
    with pytest.raises(KeyError, match="no 'l2.weight'"):
        load_state_dict(net, missing)
    with pytest.raises(KeyError, match="has 'extra.bias', which the model doesn't have"):
        load_state_dict(net, {**state, "extra.bias": Tensor.zeros(2)})
    with pytest.raises(TypeError, match="'l1.bias' is dtypes.half in the state dict"):
        load_state_dict(net, {**state, "l1.bias": Tensor.zeros(3, dtype=dtypes.float16)})
    load_state_dict(net, missing, strict=False)           # strict=False skips the missing key


def test_safe_save_load_round_trip_is_bit_exact(tmp_path):
    tensors = {
        "f32": Tensor(np.array([[1.5, -0.0, np.inf], [np.nan, 1e-30, -7.25]], dtype=np.float32)),
        "f16": Tensor(np.array([0.1, 65504.0], dtype=np.float16)),
        "bf16": Tensor([1.0, -3.140625, 1e38], dtype=dtypes.bfloat16),
        "i64": Tensor(np.array([2 ** 40, -1], dtype=np.int64)),
        "u8": Tensor(np.arange(5, dtype=np.uint8)),
        "flag": Tensor([True, False]),
        "scalar": Tensor(np.float32(3.0)),
        "view": Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).T,
    }
    path = tmp_path / "t.safetensors"
    safe_save(tensors, path, metadata={"format": "pt"})
    loaded = safe_load(path)
    assert list(loaded) == list(tensors)
    for name, t in tensors.items():
        assert loaded[name].dtype == t.dtype and loaded[name].shape == t.shape, name
        if t.dtype == dtypes.bfloat16:
            assert (loaded[name].bitcast(dtypes.uint16).numpy() == t.bitcast(dtypes.uint16).numpy()).all()
        else:
            assert loaded[name].numpy().tobytes() == t.numpy().tobytes(), name
    header_len = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert header_len % 8 == 0 and json.loads(path.read_bytes()[8:8 + header_len])["__metadata__"] == {"format": "pt"}


def test_safetensors_package_reads_our_files_and_we_read_its(tmp_path):
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    net = Net()
    state = {k: v for k, v in get_state_dict(net).items() if not k.startswith("tied")}
    safe_save(state, tmp_path / "model.safetensors")
    theirs = safetensors_numpy.load_file(str(tmp_path / "model.safetensors"))
    assert set(theirs) == set(state)
    for name, t in state.items():
        np.testing.assert_array_equal(theirs[name], t.numpy(), err_msg=name)
    bits = Tensor([1.0, -2.5], dtype=dtypes.bfloat16)
    safe_save({"b": bits}, tmp_path / "bf16.safetensors")
    raw = open(tmp_path / "bf16.safetensors", "rb").read()
    assert json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["b"]["dtype"] == "BF16"
    # and the other way: a file written by the safetensors package
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, 2], dtype=np.int16)}
    safetensors_numpy.save_file(arrays, str(tmp_path / "theirs.safetensors"))
    ours = safe_load(tmp_path / "theirs.safetensors")
    for name, a in arrays.items():
        np.testing.assert_array_equal(ours[name].numpy(), a)


def test_trained_model_round_trips_through_a_file(tmp_path):
    from tinygrad_core.nn.optim import Adam
    net, copy = Net(), Net()
    opt = Adam(get_parameters(net), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        x = Tensor.randn(2, 1, 4, 4)
        net.l2(net.l1(net.blocks[0](x).flatten(1)[:, :4]).relu()).sum().backward()
        opt.step()
    safe_save(get_state_dict(net), tmp_path / "net.safetensors")
    load_state_dict(copy, safe_load(tmp_path / "net.safetensors"))
    for name, t in get_state_dict(net).items():
        assert get_state_dict(copy)[name].numpy().tobytes() == t.numpy().tobytes(), name
    assert bf16_to_f32(np.array([0x3F80], np.uint16))[0] == 1.0
