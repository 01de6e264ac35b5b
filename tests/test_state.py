"""Model state: naming tensors, loading state dicts (and their errors), safetensors files read by the reference
`safetensors` package (and malformed ones refused when opened), PyTorch files read without torch, zip and tar."""
import io
import json
import pickle
import struct
import tarfile
import zipfile
import numpy as np
import pytest
from tinygrad_core import Tensor, dtypes
from tinygrad_core.nn import Linear, Conv2d, BatchNorm2d
from tinygrad_core.nn.state import (get_state_dict, get_parameters, load_state_dict, safe_save, safe_load,
                                    safe_load_metadata, tar_extract, torch_load, zip_extract)
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
    with pytest.raises(TypeError, match="'l1.bias' is a str in the state dict, not a Tensor"):
        load_state_dict(net, {**state, "l1.bias": "zeros"})
    assert len(load_state_dict(net, state)) == len(state)   # the tensors written, as tinygrad returns them


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
        with Tensor.train():
            opt.step()
    safe_save(get_state_dict(net), tmp_path / "net.safetensors")
    load_state_dict(copy, safe_load(tmp_path / "net.safetensors"))
    for name, t in get_state_dict(net).items():
        assert get_state_dict(copy)[name].numpy().tobytes() == t.numpy().tobytes(), name
    assert bf16_to_f32(np.array([0x3F80], np.uint16))[0] == 1.0


def write_safetensors(path, header, data: bytes):
    encoded = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data)
    return path


GOOD_ENTRY = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize("header,data,error,match", [
    ({"w": GOOD_ENTRY}, b"\0" * 4, ValueError, r"'w' has data_offsets \[0, 8\], outside the file's 4 bytes.*truncated"),
    ({"w": {**GOOD_ENTRY, "data_offsets": [8, 16]}}, b"\0" * 8, ValueError, "outside the file's 8 bytes"),
    ({"w": {**GOOD_ENTRY, "data_offsets": [4, 0]}}, b"\0" * 8, ValueError, "data_offsets"),
    (b"{not json", b"", ValueError, "header is not JSON"),
    (b"[1, 2]", b"", ValueError, "header is a list"),
    ({"w": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, ValueError, "'w' needs a dtype, a shape.*data_offsets"),
    ({"w": {**GOOD_ENTRY, "shape": "2"}}, b"\0" * 8, ValueError, "'w' needs"),
    ({"w": {**GOOD_ENTRY, "dtype": "C64"}}, b"\0" * 8, TypeError, "'w' has safetensors dtype 'C64'"),
    ({"w": {**GOOD_ENTRY, "shape": [3]}}, b"\0" * 12, ValueError, r"'w' has 8 bytes for shape \(3,\)"),
])
def test_safe_load_refuses_a_bad_file_when_it_opens_it_naming_file_and_tensor(tmp_path, header, data, error, match):
    path = write_safetensors(tmp_path / "bad.safetensors", header, data)
    for load in (safe_load, safe_load_metadata):
        with pytest.raises(error, match=match) as info:
            load(path)
        assert str(path) in str(info.value)


def test_safe_load_of_a_file_cut_inside_its_header(tmp_path):
    path = tmp_path / "cut.safetensors"
    path.write_bytes(struct.pack("<Q", 100) + b'{"w":')
    with pytest.raises(ValueError, match="header length 100 is past the end"):
        safe_load(path)


def test_torch_load_reads_torch_save_files_without_torch(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    saved = {"f32": base, "f64": torch.randn(3, dtype=torch.float64), "f16": torch.tensor([0.1, -0.0, 65504.0]).half(),
             "bf16": torch.tensor([1.0, -3.140625, 1e38]).bfloat16(), "i64": torch.tensor([2 ** 40, -1]),
             "i32": torch.tensor([-5, 7], dtype=torch.int32), "i16": torch.tensor([-300], dtype=torch.int16),
             "i8": torch.tensor([-1], dtype=torch.int8), "u8": torch.arange(3, dtype=torch.uint8),
             "flag": torch.tensor([True, False]), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
             "transposed": base.t(), "sliced": base[1:3, 2:5], "strided": base[:, ::2],
             "param": torch.nn.Parameter(torch.ones(2)), "nested": [{"inner": base[3]}], "number": 7}
    torch.save(saved, tmp_path / "all.pt")
    loaded = torch_load(tmp_path / "all.pt")
    assert loaded["number"] == 7 and set(loaded) == set(saved)
    for name, value in saved.items():
        if name in ("number", "nested"):
            continue
        ours, theirs = loaded[name], value.detach()
        assert ours.shape == tuple(theirs.shape), name
        if theirs.dtype == torch.bfloat16:
            assert ours.bitcast(dtypes.uint16).tolist() == theirs.view(torch.int16).numpy().view(np.uint16).tolist()
        else:
            assert ours.numpy().tobytes() == theirs.contiguous().numpy().tobytes(), name
    assert loaded["nested"][0]["inner"].tolist() == base[3].tolist()


def test_torch_load_reads_a_module_state_dict_into_a_model(tmp_path):
    torch = pytest.importorskip("torch")
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    torch.save(theirs.state_dict(), tmp_path / "model.pth")
    ours = [Linear(4, 3), BatchNorm2d(3)]
    state = torch_load(tmp_path / "model.pth")
    assert list(state) == list(theirs.state_dict())
    state["1.num_batches_tracked"] = state["1.num_batches_tracked"].reshape(1).cast(dtypes.int32)
    load_state_dict(ours, state)
    x = np.random.randn(5, 4).astype(np.float32)
    with torch.no_grad():
        expected = theirs.eval()(torch.from_numpy(x)).numpy()
    assert_close(ours[1](ours[0](Tensor(x))).numpy(), expected, atol=1e-5)


def test_torch_load_refuses_what_a_weights_file_does_not_hold(tmp_path):
    class Sneaky:
        def __reduce__(self):
            return (print, ("this would have run",))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("sneaky/data.pkl", pickle.dumps({"w": Sneaky()}))
    (tmp_path / "sneaky.pt").write_bytes(buffer.getvalue())
    with pytest.raises(pickle.UnpicklingError, match="sneaky.pt holds a builtins.print, refused"):
        torch_load(tmp_path / "sneaky.pt")
    (tmp_path / "plain.pt").write_bytes(pickle.dumps({"w": 1}))
    with pytest.raises(ValueError, match="not in torch.save's zip format"):
        torch_load(tmp_path / "plain.pt")


def test_zip_and_tar_extract_give_uint8_tensors_by_name(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.zip", "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("dir/x.bin", b"\x01\x02\x03")
        archive.writestr("y.txt", b"hello")
    files = zip_extract(tmp_path / "a.zip")
    assert set(files) == {"dir/x.bin", "y.txt"} and files["dir/x.bin"].tolist() == [1, 2, 3]
    assert files["y.txt"].dtype == dtypes.uint8 and bytes(files["y.txt"].tolist()) == b"hello"
    assert zip_extract(Tensor(np.frombuffer((tmp_path / "a.zip").read_bytes(), np.uint8)))["y.txt"].shape == (5,)
    (tmp_path / "z.bin").write_bytes(b"\x09" * 4)
    with tarfile.open(tmp_path / "a.tar.gz", "w:gz") as archive:
        archive.add(tmp_path / "z.bin", arcname="sub/z.bin")
    assert {k: v.tolist() for k, v in tar_extract(tmp_path / "a.tar.gz").items()} == {"sub/z.bin": [9, 9, 9, 9]}
