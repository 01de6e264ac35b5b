"""Bad input raises when the op is built, with PyTorch's or tinygrad's exception class and a message that names the
values; nothing wraps an axis around or computes a number from it."""
import math
import numpy as np
import pytest
from tinygrad_core import Tensor, TinyJit, dtypes, nn
from tinygrad_core.nn import optim

CASES = [
    (IndexError, r"axis 5 .*2 dimensions .*\(2, 3\)", lambda: Tensor.ones(2, 3).permute(0, 5)),
    (RuntimeError, r"permute order \(0,\) has 1 axes.*2", lambda: Tensor.ones(2, 3).permute(0)),
    (IndexError, r"axis 7 .*\(2, 3\)", lambda: Tensor.ones(2, 3).flip(7)),
    (RuntimeError, r"more than once", lambda: Tensor.ones(2, 3).flip((0, 0))),
    (IndexError, r"axis 4 .*\(2, 3\)", lambda: Tensor.ones(2, 3).cat(Tensor.ones(2, 3), dim=4)),
    (IndexError, r"axis 10 .*\[-3, 2\]", lambda: Tensor.ones(2, 3).unsqueeze(10)),
    (IndexError, r"axis 77", lambda: Tensor.stack(Tensor.ones(2), Tensor.ones(2), dim=77)),
    (RuntimeError, r"\(2,\) and \(3,\)", lambda: Tensor.stack(Tensor.ones(2), Tensor.ones(3))),
    (IndexError, r"axis 10 .*0 dimensions", lambda: Tensor(1.0).squeeze(10)),
    (IndexError, r"axis 1 .*0 dimensions", lambda: Tensor(1.0).sum(1)),
    (IndexError, r"axis 2 .*\(3, 4\)", lambda: Tensor.ones(3, 4).transpose(0, 2)),
    (RuntimeError, r"more than once", lambda: Tensor.ones(3, 4).mean(axis=(0, -2))),
    (RuntimeError, r"more than once", lambda: Tensor.ones(3, 4).sum(axis=(1, 1))),
    (TypeError, r"float 3.0", lambda: Tensor.ones(6).reshape(3.0, 2)),
    (ValueError, r"negative size.*\(-3, 2\)", lambda: Tensor.empty(-3, 2)),
    (ValueError, r"negative size", lambda: Tensor.zeros(2, -1)),
    (RuntimeError, r"rounding_mode.*'typo'", lambda: Tensor([1.0]).div(2, rounding_mode="typo")),
    (ValueError, r"linspace.*bool", lambda: Tensor.linspace(0, 1, 5, dtype=dtypes.bool)),
    (TypeError, r"shifts are for integers", lambda: Tensor([1.0]) << 2),
    (TypeError, r"shifts are for integers", lambda: Tensor([1]) >> 1.5),
    (ValueError, r"step must be nonzero", lambda: Tensor.arange(0, 5, 0)),
    (IndexError, r"0-d tensor .*position 0", lambda: Tensor.cat(Tensor(1.0), Tensor(2.0))),
    (RuntimeError, r"flatten", lambda: Tensor.ones(2, 3, 4).flatten(2, 1)),
    (IndexError, r"empty", lambda: Tensor.ones(0, 3).max(0)),
    (RuntimeError, r"empty", lambda: Tensor.ones(0, 3).max()),          # (PyTorch: IndexError along an axis only)
    (ValueError, r"numbers only", lambda: Tensor(["a", "b"])),
    # a ragged list: PyTorch's class and words, and which element
    (ValueError, r"length 2 at dim 1 \(got 1\) at element \[1\]", lambda: Tensor([[1, 2], [3]])),
    (ValueError, r"length 1 at dim 2 \(got 2\) at element \[1, 1\]", lambda: Tensor([[[1], [2]], [[3], [4, 5]]])),
    (ValueError, r"a number and a sequence .*element \[1\]", lambda: Tensor([1.0, [2.0]])),
    (RuntimeError, r"empty axis", lambda: Tensor.ones(0, 3).argmax(0)),
    (TypeError, r"axis must be an int", lambda: Tensor.ones(2, 3).sum(1.0)),
    (RuntimeError, r"gather: index has 1 dims", lambda: Tensor.ones(2, 3).gather(0, Tensor([0, 1]))),
    (RuntimeError, r"integer tensor", lambda: Tensor.ones(2, 3).gather(0, Tensor([[0.0, 1.0, 1.0]]))),   # (torch)
    (RuntimeError, r"larger than the tensor", lambda: Tensor.ones(2, 1, 1).gather(0, Tensor.ones(3, 4, 5).int())),
    (ValueError, r"pad_to", lambda: Tensor.ones(2, 3).pad_to(4)),
    (ValueError, r"pad needs 2 \(before, after\) pairs", lambda: Tensor.ones(2, 3).pad((2, 0, 2))),
    (RuntimeError, r"only one dimension can be -1", lambda: Tensor.ones(4).reshape(-1, -1, 2)),
    (RuntimeError, r"clip needs", lambda: Tensor.ones(2).clip(None, None)),
    (ValueError, r"negative size.*\(-1, 2\)", lambda: Tensor.randn(-1, 2)),
    (ValueError, r"negative size.*\(3, -2\)", lambda: Tensor.rand(3, -2)),
    (ValueError, r"negative size.*\(2, -1\)", lambda: nn.Linear(-1, 2)),
    (RuntimeError, r"int labels.*dtypes.float \(4,\)", lambda: Tensor.ones(4, 3).cross_entropy(Tensor([0.0, 1, 2, 0]))),
    (RuntimeError, r"int labels", lambda: Tensor.ones(2, 3).sparse_categorical_crossentropy(Tensor([0.5, 1.0]))),
    (RuntimeError, r"kernel \(0, 0\)", lambda: nn.Conv2d(1, 1, 0)(Tensor.ones(1, 1, 4, 4))),
    (TypeError, r"params is float 1.0", lambda: optim.SGD([Tensor.ones(2), 1.0], lr=0.1)),
    (ValueError, r"expand \(3,\) to \(-1, 3\).*-1 keeps", lambda: Tensor.ones(3).expand(-1, 3)),
    (ValueError, r"expand \(1,\) to \(-2,\)", lambda: Tensor.ones(1).expand(-2)),
    (ValueError, r"betas .*b1=1.5", lambda: optim.Adam([Tensor.ones(2)], b1=1.5)),
    (ValueError, r"betas .*b2=-0.1", lambda: optim.AdamW([Tensor.ones(2)], b2=-0.1)),
    (ValueError, r"eps=-1.0", lambda: optim.LAMB([Tensor.ones(2)], eps=-1.0)),
    (ValueError, r"weight_decay=-1.0", lambda: optim.Adam([Tensor.ones(2)], weight_decay=-1.0)),
]


@pytest.mark.parametrize("error,message,build", CASES, ids=[c[1][:30] for c in CASES])
def test_bad_input_raises_when_built(error, message, build):
    with pytest.raises(error, match=message):
        build()


def test_where_across_devices_names_both():
    cond = Tensor([True, False], device="PYTHON")
    with pytest.raises(RuntimeError, match="PYTHON.*CPU|CPU.*PYTHON"):
        cond.where(Tensor([1.0, 2.0], device="CPU"), 0.0)


def test_axes_accept_numpy_integers_and_reshape_takes_none():
    t = Tensor.arange(6).reshape(2, 3)
    assert t.sum(np.int64(1)).tolist() == [3, 12]
    assert t.reshape(None, 3).shape == (2, 3) and Tensor.ones(2, 3, 4).reshape(None, 12).shape == (2, 12)
    assert t.size() == (2, 3) and t.size(-1) == 3
    assert t.pad_to(3, None).shape == (3, 3) and t.shrink_to(1, 2).tolist() == [[0, 1]]
    assert t.short().dtype == dtypes.int16 and not t.is_floating_point() and t.float().is_floating_point()
    assert t.empty_like().shape == (2, 3) and t.const_like(7).tolist() == [[7] * 3] * 2


def test_arange_past_int32_is_int64():
    t = Tensor.arange(2**31, 2**31 + 3)
    assert t.dtype == dtypes.int64 and t.tolist() == [2**31, 2**31 + 1, 2**31 + 2]
    assert Tensor.arange(5).dtype == dtypes.int32


def test_from_blob_copies_host_memory():
    a = np.arange(6, dtype=np.float32)
    t = Tensor.from_blob(a.ctypes.data, (2, 3), dtype=dtypes.float32)
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_from_url_reads_a_local_file(tmp_path):
    path = tmp_path / "blob.bin"
    path.write_bytes(bytes([1, 2, 250]))
    assert Tensor.from_url(path.as_uri()).tolist() == [1, 2, 250]


def test_reading_values_inside_a_jit_capture_raises():
    # a replay runs no Python: the number read while capturing would come back from every later call
    step = TinyJit(lambda x: (x * 2).realize().sum().item())
    assert step(Tensor.ones(3)) == 6.0
    with pytest.raises(RuntimeError, match="TinyJit capture"):
        step(Tensor.ones(3) * 2)


def test_layers_with_no_inputs_build_as_in_pytorch():
    layer = nn.Linear(0, 2)      # (PyTorch: weight (2, 0), bias bound 0, so the output is the zero bias)
    assert layer.weight.shape == (2, 0) and layer(Tensor.ones(3, 0)).tolist() == [[0.0, 0.0]] * 3


# found by probing ~110 more inputs a user plausibly gets wrong: each gave a number, or failed inside LLVM
MORE_CASES = [
    (TypeError, r"bitwise ops are for integers: got dtypes.float", lambda: Tensor.ones(2).bitwise_and(Tensor.ones(2))),
    (TypeError, r"bitwise ops are for integers", lambda: Tensor.ones(2) ^ Tensor.ones(2)),
    (TypeError, r"bitwise ops are for integers", lambda: Tensor.ones(2) | 1),
    (TypeError, r"bitwise ops are for integers", lambda: Tensor.ones(2).bitwise_not()),
    (TypeError, r"bitwise ops are for integers", lambda: Tensor([1, 2]) & 1.5),
    (ValueError, r"dropout probability .*1.5", lambda: Tensor.ones(2, 3).dropout(1.5)),
    (ValueError, r"dropout probability .*-0.1", lambda: Tensor.ones(2, 3).dropout(-0.1)),
    (ValueError, r"negative size.*\(-1, -1\)", lambda: Tensor.eye(-1)),
    (ValueError, r"negative size.*\(3, -2\)", lambda: Tensor.eye(3, -2)),
    (RuntimeError, r"normal needs std >= 0, got std=-1.0", lambda: Tensor.normal(2, 3, std=-1.0)),
    (RuntimeError, r"uniform needs low <= high, got low=2.0, high=1.0", lambda: Tensor.uniform(3, low=2.0, high=1.0)),
    (RuntimeError, r"repeat_interleave .*-1", lambda: Tensor.ones(3).repeat_interleave(-1)),
    (RuntimeError, r"repeat_interleave .*1.5", lambda: Tensor.ones(3).repeat_interleave(1.5)),
]


@pytest.mark.parametrize("error,message,build", MORE_CASES, ids=[c[1][:30] for c in MORE_CASES])
def test_more_bad_input_raises_when_built(error, message, build):
    with pytest.raises(error, match=message):
        build()


def test_the_valid_neighbours_of_those_still_work():
    assert (Tensor([True, False]) & True).tolist() == [True, False] and (Tensor([3, 5]) ^ 1).tolist() == [2, 4]
    assert Tensor([3]).bitwise_not().tolist() == [-4] and Tensor([True]).bitwise_not().tolist() == [False]
    assert Tensor.ones(2).dropout(1.0).tolist() == [1.0, 1.0]      # (outside training: as torch, the input)
    assert Tensor.eye(0).shape == (0, 0) and Tensor.ones(3).repeat_interleave(0).shape == (0,)
    assert Tensor.uniform(2, low=1.0, high=1.0).tolist() == [1.0, 1.0] and Tensor.normal(2, std=0.0).tolist() == [0, 0]


# from an outside catalog of bad inputs: each gave a number (or failed in the code generator), or named internals
ZERO = r"integer division or modulo by zero"
BOOL_SUB = r"Subtraction, the `-` operator, with two bool tensors is not supported"
NOT_TENSORS = r"params argument given to the optimizer should be an iterable of Tensors, but got Tensor"
PROBABILITIES = r"probability tensor contains either `inf`, `nan` or element < 0"
CATALOG_CASES = [
    (ZeroDivisionError, ZERO, lambda: Tensor([1, 2]) // 0),
    (ZeroDivisionError, ZERO, lambda: Tensor([1, 2]) % 0),
    (ZeroDivisionError, ZERO, lambda: Tensor(-7) // 0),
    (ZeroDivisionError, ZERO, lambda: 7 // Tensor([0, 1])),
    (ZeroDivisionError, ZERO, lambda: Tensor([1, 2]) // Tensor([0, 1])),          # (a realized divisor)
    (ZeroDivisionError, ZERO, lambda: Tensor([1, 2], dtype=dtypes.int64) % Tensor(0)),
    (ZeroDivisionError, ZERO, lambda: Tensor([3]).div(0, rounding_mode="trunc")),
    (ZeroDivisionError, ZERO, lambda: Tensor([3]).fmod(0)),
    (RuntimeError, BOOL_SUB, lambda: Tensor([True]) - Tensor([True])),
    (RuntimeError, BOOL_SUB, lambda: True - Tensor([True, False])),
    (TypeError, r"expand sizes .*float 3.0 in \(2, 3.0\)", lambda: Tensor.ones(2, 1).expand(2, 3.0)),
    (RuntimeError, r"NoneType None", lambda: Tensor([None])),
    (RuntimeError, r"NoneType None", lambda: Tensor([[1.0], [None]], dtype=dtypes.float32)),
    (ValueError, r"int 1180591620717411303424: .*int64", lambda: Tensor([2**70])),       # (PyTorch's class)
    (ValueError, r"int 9223372036854775808: .*int64", lambda: Tensor([2**63])),
    (ValueError, r"rand only supports float dtypes, got dtypes.int", lambda: Tensor.rand(4, dtype=dtypes.int32)),
    (ValueError, r"randn only supports float dtypes", lambda: Tensor.randn(4, dtype=dtypes.int32)),
    (TypeError, r"linspace .*steps 2.5", lambda: Tensor.linspace(0, 1, 2.5)),
    (TypeError, r"fill_value must be a number, got str 'a'", lambda: Tensor.full((2, 2), "a")),
    (TypeError, r"fill_value must be a number, got NoneType", lambda: Tensor.full((2,), None, dtype=dtypes.float32)),
    # an integer fill outside its dtype raises, as PyTorch (it wrapped: 300 as uint8 was 44, 2**70 as int64 was 0)
    (RuntimeError, r"value 300 cannot be converted to dtypes.uchar .*0 to 255", lambda: Tensor.full((2,), 300,
                                                                                                 dtype=dtypes.uint8)),
    (RuntimeError, r"value 2147483648 .*dtypes.int ", lambda: Tensor.full((2,), 2**31, dtype=dtypes.int32)),
    (RuntimeError, r"value -1 .*dtypes.uint ", lambda: Tensor.full((2,), -1, dtype=dtypes.uint32)),
    (RuntimeError, r"value nan .*dtypes.int ", lambda: Tensor.full((2,), math.nan, dtype=dtypes.int32)),
    (RuntimeError, r"value 1e\+20 .*dtypes.long", lambda: Tensor.full((2,), 1e20, dtype=dtypes.int64)),
    (TypeError, r"tril: diagonal must be an int, got float 1.5", lambda: Tensor.ones(2, 2).tril(1.5)),
    (TypeError, r"triu: diagonal must be an int, got str", lambda: Tensor.ones(2, 2).triu("1")),
    (RuntimeError, r"unsupported range: 0 -> inf", lambda: Tensor.arange(float("inf"))),
    (RuntimeError, r"unsupported range: 0 -> nan", lambda: Tensor.arange(float("nan"))),
    (RuntimeError, PROBABILITIES, lambda: Tensor([0.5, -0.5]).multinomial(1)),
    (RuntimeError, PROBABILITIES, lambda: Tensor([0.5, float("nan")]).multinomial(1)),
    (RuntimeError, PROBABILITIES, lambda: Tensor([[1.0, 1.0], [1.0, float("inf")]]).multinomial(2, True)),
    (TypeError, NOT_TENSORS, lambda: optim.SGD(Tensor.ones(3, requires_grad=True), lr=0.1)),
    (TypeError, NOT_TENSORS, lambda: optim.Adam(Tensor.ones(3))),
    (RuntimeError, r"\(2, 3, 4\) @ \(3, 4, 5\) \(batch sizes 2 and 3",
     lambda: Tensor.ones(2, 3, 4) @ Tensor.ones(3, 4, 5)),
    (RuntimeError, r"split sizes must be >= 0 .*got 0 for \(6,\)", lambda: Tensor.ones(6).split(0)),
    (RuntimeError, r"split sizes must be >= 0 .*got -1 for", lambda: Tensor.ones(6).split(-1)),
    (RuntimeError, r"split sizes must be >= 0 .*got \[2, -1, 5\]", lambda: Tensor.ones(6).split([2, -1, 5])),
    (TypeError, r"padding must be ints.*float 1.5", lambda: Tensor.ones(2, 3).pad((1.5, 1))),
    (RuntimeError, r"repeat needs a count >= 0 for each of the 2 dims of \(2, 3\): \(2,\)",
     lambda: Tensor.ones(2, 3).repeat(2)),
    (RuntimeError, r"repeat needs a count >= 0 .*\(2, -1\)", lambda: Tensor.ones(2, 3).repeat(2, -1)),
    (TypeError, r"repeats must be ints.*float 1.5", lambda: Tensor.ones(2).repeat(1.5)),
]


@pytest.mark.parametrize("error,message,build", CATALOG_CASES, ids=[f"catalog{i}" for i in range(len(CATALOG_CASES))])
def test_catalog_bad_input_raises_when_built(error, message, build):
    with pytest.raises(error, match=message):
        build()


def test_the_valid_neighbours_of_the_catalog_cases_still_work():
    assert (Tensor([7, -7]) // 2).tolist() == [3, -4] and (Tensor([7, -7]) % 3).tolist() == [1, 2]
    assert (Tensor([1, 2]) // Tensor([3, 1])).tolist() == [0, 2] and (Tensor([1.0, 0.0]) // 0).tolist()[0] == math.inf
    assert (Tensor.zeros(0, dtype=dtypes.int32) // 0).shape == (0,)      # (nothing is divided, as in PyTorch)
    assert (Tensor([True, False]) & Tensor([True, True])).tolist() == [True, False]
    assert (Tensor([True]) - 1).tolist() == [0] and (1 - Tensor([True, False])).tolist() == [0, 1]
    assert (-Tensor([True, False])).tolist() == [False, True]       # (tinygrad's logical not)
    assert Tensor.ones(2, 1).expand(np.int64(2), -1).shape == (2, 1) and Tensor.ones(2, 3).pad((1, np.int64(1))).shape \
        == (2, 5)
    big = Tensor([2**40, -2**63])
    assert big.dtype == dtypes.int64 and big.tolist() == [2**40, -2**63] and Tensor([2**31 - 1]).dtype == dtypes.int32
    assert Tensor([2**63], dtype=dtypes.uint64).tolist() == [2**63]
    small = Tensor.randint(1000, low=-2**31, high=2**31)
    assert small.dtype == dtypes.int32 and Tensor.randint(3, high=5, dtype=dtypes.int8).dtype == dtypes.int8
    wide = Tensor.randint(1000, low=2**33, high=2**34).numpy()
    assert wide.dtype == np.int64 and wide.min() >= 2**33 and wide.max() < 2**34 and len(set(wide.tolist())) > 900
    assert Tensor.rand(2, dtype=dtypes.float16).dtype == dtypes.float16 and Tensor.randn(2, dtype="float64").dtype \
        == dtypes.float64
    assert Tensor.linspace(0, 1, 3).tolist() == [0.0, 0.5, 1.0]
    assert Tensor.full((2,), np.float32(1.5)).tolist() == [1.5] * 2
    # the ends of an integer dtype and a float truncated into it are fine, as in PyTorch
    assert Tensor.full((2,), 255, dtype=dtypes.uint8).tolist() == [255] * 2
    assert Tensor.full((1,), -2**63, dtype=dtypes.int64).tolist() == [-2**63]
    assert Tensor.full((2,), 3.7, dtype=dtypes.int32).tolist() == [3] * 2
    assert Tensor.arange(0, 5, math.inf).shape == (0,)
    assert Tensor([0.0, 1.0]).multinomial(1).tolist() == [1]
    assert [t.shape for t in Tensor.ones(6).split(4)] == [(4,), (2,)]
    assert [t.shape for t in Tensor.ones(0).split(0)] == [(0,)]
    assert [t.shape for t in Tensor.ones(6).split([2, 0, 4])] == [(2,), (0,), (4,)]
    assert Tensor.ones(2, 3).repeat(2, 0).shape == (4, 0) and Tensor.ones(2, 3).repeat(1, 2, 1).shape == (1, 4, 3)
    assert (Tensor.ones(2, 1, 3, 4) @ Tensor.ones(5, 4, 2)).shape == (2, 5, 3, 2)
    w = Tensor.ones(3, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    with Tensor.train():
        (w * w).sum().backward()
        opt.step()
    assert w.tolist() == pytest.approx([0.8] * 3)


def test_pad_pairs_and_group_norm_of_a_single_value_raise_as_torch():
    # a pair of one value failed inside as "not enough values to unpack"
    with pytest.raises(ValueError, match=r"pad needs 2 \(before, after\) pairs for shape \(3, 4\).*\(1,\)"):
        Tensor.ones(3, 4).pad(((0, 1), (1,)), mode="replicate")
    with pytest.raises(ValueError, match=r"pad needs 3 .*\(0, 1, 1\)"):       # (torch: RuntimeError; tinygrad's)
        Tensor.ones(1, 3, 4).pad((0, 1, 1), mode="replicate")
    # torch refuses a batch of one with one value per group (Expected more than 1 value per channel); we gave the bias
    for shape in ((1, 4), (1, 4, 1, 1)):
        with pytest.raises(ValueError, match=r"GroupNorm\(4, 4\) got input \(1, 4.*more than one value per group"):
            nn.GroupNorm(4, 4)(Tensor.ones(*shape))
    assert nn.GroupNorm(4, 4)(Tensor.ones(2, 4)).shape == (2, 4) and nn.GroupNorm(2, 4)(Tensor.ones(1, 4)).shape \
        == (1, 4)


# from a second outside catalog: each gave a silent number (a broadcast loss, a clamped randint, an empty iteration), or
# failed inside as AttributeError reading a list's .shape (PyTorch: TypeError naming the argument)
NOT_TENSOR = r"must be a Tensor, not list"
SECOND_CATALOG_CASES = [
    (ValueError, r"target size \(\(3,\)\) that is different to the input size \(\(3, 1\)\)",
     lambda: Tensor.ones(3, 1).sigmoid().binary_crossentropy(Tensor([1.0, 0.0, 1.0]))),
    (ValueError, r"target size \(\(3,\)\) .*input size \(\(3, 1\)\)",
     lambda: Tensor.ones(3, 1).binary_crossentropy_logits(Tensor([1.0, 0.0, 1.0]))),
    (ValueError, r"target size \(\(\)\)", lambda: Tensor.ones(3).binary_crossentropy_logits(Tensor(1.0), pos_weight=2)),
    (ValueError, r"randint .*dtypes.int .*low=0, high=1099511627776",
     lambda: Tensor.randint(3, low=0, high=2**40, dtype=dtypes.int32)),
    (ValueError, r"randint .*dtypes.uchar .*low=-5", lambda: Tensor.randint(3, low=-5, high=2, dtype=dtypes.uint8)),
    (ValueError, r"randint .*high=257", lambda: Tensor.randint(3, high=257, dtype=dtypes.uint8)),
    (TypeError, r"iteration over, a 0-d tensor", lambda: list(Tensor(1.0))),
    (TypeError, r"iteration over, a 0-d tensor", lambda: [x for x in Tensor(2)]),
    (ValueError, r"groups must be a positive integer, got 0", lambda: nn.Conv2d(4, 4, 3, groups=0)),
    (ValueError, r"groups must be a positive integer, got -2", lambda: nn.ConvTranspose2d(4, 4, 3, groups=-2)),
    (ValueError, r"stack expects a non-empty list of tensors", lambda: Tensor.stack()),
    (ValueError, r"stack expects a non-empty list of tensors", lambda: Tensor.stack([])),
    (TypeError, r"stack\(\): element 1 must be a Tensor, not list", lambda: Tensor.stack(Tensor.ones(2), [1.0, 2.0])),
    (TypeError, r"gather\(\): argument 'index' " + NOT_TENSOR, lambda: Tensor.ones(2, 3).gather(1, [[0], [1]])),
    (TypeError, r"gather\(\): argument 'index' must be a Tensor, not ndarray",
     lambda: Tensor.ones(3).gather(0, np.array([0, 1]))),
    (RuntimeError, r"gather: index must be an integer tensor, got dtypes.bool",
     lambda: Tensor.ones(3).gather(0, Tensor([True, False]))),
    (TypeError, r"masked_fill\(\): argument 'mask' " + NOT_TENSOR,
     lambda: Tensor.ones(3).masked_fill([True, False, True], 0.0)),
    (TypeError, r"masked_select\(\): argument 'mask' " + NOT_TENSOR,
     lambda: Tensor.ones(3).masked_select([True, False, True])),
    (TypeError, r"matmul\(\): argument 'other' " + NOT_TENSOR, lambda: Tensor.ones(2, 2) @ [[1.0, 2.0], [3.0, 4.0]]),
    (TypeError, r"matmul\(\): argument 'input' " + NOT_TENSOR, lambda: [[1.0, 2.0], [3.0, 4.0]] @ Tensor.ones(2, 2)),
    (TypeError, r"linear\(\): argument 'weight' " + NOT_TENSOR, lambda: Tensor.ones(2, 2).linear([[1.0, 0.0]] * 2)),
    (TypeError, r"conv2d\(\): argument 'weight' " + NOT_TENSOR, lambda: Tensor.ones(1, 1, 3, 3).conv2d([[[[1.0]]]])),
    (TypeError, r"conv2d\(\): argument 'bias' " + NOT_TENSOR,
     lambda: Tensor.ones(1, 1, 3, 3).conv2d(Tensor.ones(1, 1, 1, 1), bias=[1.0])),
    (TypeError, r"conv_transpose2d\(\): argument 'weight' " + NOT_TENSOR,
     lambda: Tensor.ones(1, 1, 3, 3).conv_transpose2d([[[[1.0]]]])),
    (TypeError, r"cross_entropy\(\): argument 'target' " + NOT_TENSOR,
     lambda: Tensor.ones(3, 3).cross_entropy([0, 1, 2])),
    (TypeError, r"nll_loss\(\): argument 'target' " + NOT_TENSOR, lambda: Tensor.ones(3, 2).nll_loss([0, 1, 1])),
    (TypeError, r"embedding\(\): argument 'indices' " + NOT_TENSOR, lambda: nn.Embedding(10, 4)([1, 2])),
    (TypeError, r"einsum\(\): element 1 " + NOT_TENSOR, lambda: Tensor.einsum("i,i->", Tensor.ones(2), [1.0, 2.0])),
    (TypeError, r"Tensor and NoneType", lambda: Tensor.ones(2) + None),
    (TypeError, r"Tensor and NoneType", lambda: None * Tensor.ones(2)),
    (TypeError, r"Tensor and list", lambda: Tensor.ones(2) + [1.0, 2.0]),
    (TypeError, r"Tensor and list", lambda: Tensor.ones(3).maximum([1.0, 2.0, 3.0])),
    (TypeError, r"Tensor and list", lambda: Tensor.ones(2).lerp([3.0, 4.0], 0.5)),
    (TypeError, r"Tensor and list", lambda: Tensor([True, False]).where([1.0, 2.0], 0.0)),
    (TypeError, r"Tensor and list", lambda: Tensor.ones(2, 3).mse_loss([[1.0] * 3] * 2)),
    (TypeError, r"Tensor and list", lambda: Tensor.ones(2, 3).binary_crossentropy([[1.0] * 3] * 2)),
    (OverflowError, r"arange \[0, 10\) step 1 is not representable in dtypes.bool",
     lambda: Tensor.arange(10, dtype=dtypes.bool)),
    (OverflowError, r"arange \[0, 300\) .*dtypes.uchar", lambda: Tensor.arange(300, dtype=dtypes.uint8)),
]


@pytest.mark.parametrize("error,message,build", SECOND_CATALOG_CASES,
                         ids=[f"second{i}" for i in range(len(SECOND_CATALOG_CASES))])
def test_second_catalog_bad_input_raises_when_built(error, message, build):
    with pytest.raises(error, match=message):
        build()


def test_the_valid_neighbours_of_the_second_catalog_cases_still_work():
    assert Tensor(None).shape == () and Tensor(None).tolist() == 0.0       # (tinygrad's 0.0)
    assert [r.tolist() for r in Tensor([[1, 2], [3, 4]])] == [[1, 2], [3, 4]] and list(Tensor.ones(0)) == []
    p = Tensor([0.25, 0.75])
    assert p.binary_crossentropy(1.0).item() == pytest.approx(-np.log([0.25, 0.75]).mean(), rel=1e-6)
    assert Tensor([0.0, 2.0]).binary_crossentropy_logits(0.0).shape == ()       # (a number target, as in tinygrad)
    assert (Tensor.ones(2) + (1.0, 2.0)).tolist() == [2.0, 3.0]                   # (a tuple, as in tinygrad)
    assert (Tensor.ones(2) + np.array([1.0, 2.0])).tolist() == [2.0, 3.0]         # (an array, as in PyTorch)
    assert (Tensor.ones(2) * np.float32(2)).tolist() == [2.0, 2.0]
    cond = Tensor([True, False])
    assert cond.where(1.0, 2).tolist() == [1.0, 2.0] and cond.where(1, 2).dtype == dtypes.int32
    assert cond.where(True, False).dtype == dtypes.bool and Tensor([2, 0]).where(1.0, 2.0).tolist() == [1.0, 2.0]
    assert cond.where(3, Tensor([1.5, 2.5], dtype=dtypes.float16)).dtype == dtypes.float16
    assert Tensor.stack([Tensor.ones(2), Tensor.zeros(2)], dim=1).tolist() == [[1, 0], [1, 0]]
    assert Tensor.ones(2).stack(Tensor.zeros(2)).shape == (2, 2) and Tensor.stack(Tensor.ones(3)).shape == (1, 3)
    assert Tensor([[1.0], [2.0]]).matmul(Tensor.eye(2) * 2, reverse=True).tolist() == [[2.0], [4.0]]    # (x @ self)
    assert Tensor.einsum("i,i->", [Tensor.ones(2), Tensor.ones(2)]).item() == 2.0
    assert Tensor.ones(2, 3).gather(1, Tensor([[0], [2]])).tolist() == [[1.0], [1.0]]
    assert Tensor.ones(1, 1, 3, 3).conv2d(Tensor.ones(1, 1, 1, 1), bias=Tensor([1.0])).shape == (1, 1, 3, 3)
    assert Tensor.ones(2, 2).linear(Tensor.ones(2, 3), Tensor.zeros(3)).tolist() == [[2.0] * 3] * 2
    assert nn.Conv2d(4, 4, 3, groups=2).weight.shape == (4, 2, 3, 3)
    assert Tensor.arange(2, dtype=dtypes.bool).tolist() == [False, True]
    assert Tensor.arange(0, dtype=dtypes.uint8).shape == (0,)
    assert Tensor.arange(255, 250, -2, dtype=dtypes.uint8).tolist() == [255, 253, 251]
    assert Tensor.arange(2**31, 2**31 + 2).dtype == dtypes.int64
    r = Tensor.randint(200, low=0, high=256, dtype=dtypes.uint8).numpy()
    assert r.dtype == np.uint8 and r.max() > 200
    assert Tensor.randint(4, low=0, high=2, dtype=dtypes.bool).dtype == dtypes.bool
    assert Tensor.randint(3, low=0, high=2**40, dtype=dtypes.float32).dtype == dtypes.float32
