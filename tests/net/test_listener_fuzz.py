"""A bounded smoke of the listener fuzzer (fuzz/listener_fuzz.py; ``make fuzz`` runs it
longer): mutated MS-MQQB streams through a real listener raise nothing but typed protocol
errors, the QM keeps serving a well-behaved peer, memory and incoming sequences stay
bounded; and the fuzzer does catch an untyped exception planted in the session."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from openmsmq.protocol.session import Session

ROOT = Path(__file__).resolve().parents[2]


def _fuzzer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("listener_fuzz", ROOT / "fuzz" / "listener_fuzz.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["listener_fuzz"] = module
    spec.loader.exec_module(module)
    return module


def test_mutated_streams_through_a_real_listener(tmp_path: Path) -> None:
    result = _fuzzer().fuzz(tmp_path, seed=20261127, rounds=150, check_every=50)
    assert result.errors == [], result.errors
    assert result.rounds == 150 and result.checks == 4


def test_the_fuzzer_catches_an_untyped_exception(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self, h, now):  # type: ignore[no-untyped-def]
        raise KeyError("planted")  # a SessionHeader handler with a bug

    monkeypatch.setattr(Session, "_on_session_header", broken)
    result = _fuzzer().fuzz(tmp_path, seed=20261127, rounds=60, check_every=50)
    assert any("untyped exception" in e and "planted" in e for e in result.errors), result.errors
