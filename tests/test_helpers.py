"""helpers under tinygrad's names: Context and its settings, fetch (offline: file:// URLs and local paths), timers,
the tqdm bars, and the small list utilities."""
import gzip
import urllib.request

import numpy as np
import pytest

from tinygrad_core import Tensor
from tinygrad_core.helpers import (
    CI,
    DEBUG,
    JIT,
    OSX,
    TRAINING,
    WIN,
    Context,
    ContextVar,
    Profiling,
    Timing,
    all_int,
    all_same,
    dedup,
    fetch,
    flatten,
    fully_flatten,
    getenv,
    partition,
    round_up,
    tqdm,
    trange,
    unwrap,
)


def test_context_rejects_an_unknown_name_with_key_error_as_tinygrad():
    with pytest.raises(KeyError, match="no setting named 'NOT_A_SETTING'.*DEBUG"), Context(NOT_A_SETTING=1):
        pass
    with Context(DEBUG=2, JIT=0):
        assert DEBUG.value == 2 and not JIT and getenv("JIT", 1) == 0
    assert JIT.value == 1
    new = ContextVar("TEST_HELPERS_SETTING", 3)
    with Context(TEST_HELPERS_SETTING=4):
        assert new == 4 and new > 3 and new >= 4 and new < 5 and new <= 4
    assert new.value == 3


def test_a_setting_called_sets_itself_for_a_block():
    with TRAINING(1):
        assert TRAINING and Tensor.training
        with Tensor.train(False):
            assert not TRAINING
    assert not Tensor.training


def test_platform_flags_are_booleans():
    assert {type(OSX), type(WIN), type(CI)} == {bool}


def test_fetch_local_paths_and_file_urls_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGRAD_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "weights.bin"
    source.write_bytes(b"abc")
    assert fetch(str(source)) == source
    cached = fetch(source.as_uri())
    assert cached.parent == tmp_path / "cache" / "downloads" and cached.read_bytes() == b"abc"
    source.write_bytes(b"changed")
    assert fetch(source.as_uri()).read_bytes() == b"abc"                      # cached: read once
    assert fetch(source.as_uri(), allow_caching=False).read_bytes() == b"changed"
    named = fetch(source.as_uri(), name="w.bin", subdir="models")
    assert named == tmp_path / "cache" / "downloads" / "models" / "w.bin"
    packed = tmp_path / "data.gz"
    packed.write_bytes(gzip.compress(b"unzipped"))
    assert fetch(packed.as_uri(), gunzip=True).read_bytes() == b"unzipped"
    assert fetch(packed.as_uri(), tmp_path / "own" / "place").read_bytes() == packed.read_bytes()


def test_fetch_leaves_no_partial_file_when_a_download_breaks(tmp_path, monkeypatch):
    class BrokenResponse:
        def read(self, n):
            raise ConnectionResetError("connection reset")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False
    monkeypatch.setattr(urllib.request, "urlopen", lambda request, timeout: BrokenResponse())
    with pytest.raises(ConnectionResetError):
        fetch("http://example.invalid/file", tmp_path / "file")
    assert not (tmp_path / "file").exists()


def test_timing_and_profiling_print_and_work_as_decorators(capsys):
    with Timing("block ", on_exit=lambda ns: f" ({ns} ns)"):
        sum(range(1000))
    out = capsys.readouterr().out
    assert out.startswith("block ") and " ms (" in out

    @Profiling(frac=1.0)
    def work():
        return sorted(range(1000), key=lambda x: -x)
    assert work()[0] == 999
    assert "function calls" in capsys.readouterr().out
    with Profiling(enabled=False):
        pass
    assert capsys.readouterr().out == ""


def test_tqdm_and_trange_are_the_tqdm_bars():
    pytest.importorskip("tqdm")
    assert list(tqdm([1, 2, 3], disable=True)) == [1, 2, 3]
    assert list(trange(4, disable=True)) == [0, 1, 2, 3]


def test_small_list_utilities():
    assert dedup([3, 1, 3, 2, 1]) == [3, 1, 2]
    assert partition(range(6), lambda x: x % 2 == 0) == ([0, 2, 4], [1, 3, 5])
    assert all_same([2, 2, 2]) and all_same([]) and not all_same([1, 2])
    assert all_int((1, 2)) and not all_int((1, 2.0))
    assert round_up(10, 4) == 12 and round_up(12, 4) == 12
    assert flatten([[1, 2], [3]]) == [1, 2, 3]
    assert fully_flatten([[1, [2, 3]], np.array([[4, 5]]), np.array(6), "ab"]) == [1, 2, 3, 4, 5, 6, "ab"]
    assert unwrap(0) == 0
    with pytest.raises(AssertionError):
        unwrap(None)
