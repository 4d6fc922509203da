"""atlascat._heap: the malloc thresholds are raised for a fit and handed back after it."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat import _heap
from atlascat.irt.calibrate import calibrate


class _FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.fixture
def fake(monkeypatch):
    lib = _FakeLibc()
    monkeypatch.setattr(_heap, "_glibc", lambda: lib)
    monkeypatch.delenv("ATLAS_KEEP_MALLOC", raising=False)
    return lib


def test_thresholds_raised_once_for_nested_blocks_and_handed_back(fake):
    with _heap.retained_heap():
        with _heap.retained_heap():
            assert fake.calls == [("mallopt", -3, 32 << 20), ("mallopt", -1, 256 << 20)]
        assert len(fake.calls) == 2  # the inner block's end hands nothing back
    assert fake.calls[2:] == [("mallopt", -1, 64 << 20), ("malloc_trim", 0)]


def test_handed_back_when_the_block_raises(fake):
    with pytest.raises(RuntimeError):
        with _heap.retained_heap():
            raise RuntimeError("boom")
    assert fake.calls[-1] == ("malloc_trim", 0)


def test_env_switch_turns_it_off(fake, monkeypatch):
    monkeypatch.setenv("ATLAS_KEEP_MALLOC", "1")
    with _heap.retained_heap():
        pass
    assert fake.calls == []


def test_calibrate_runs_inside_it(fake, rng):
    y = (rng.random((60, 8)) < 0.5).astype(float)
    calibrate(y, "2pl", max_iter=5)
    assert ("malloc_trim", 0) in fake.calls


def test_real_libc_call_is_harmless():
    with _heap.retained_heap():   # on glibc: real mallopt calls; elsewhere: nothing
        a = np.ones((1000, 1000))
        assert a.sum() == 1e6
