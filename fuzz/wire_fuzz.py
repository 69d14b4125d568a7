"""Coverage-guided fuzzing of the wire decoders with atheris.

Run: ``make fuzz`` (installs the ``[fuzz]`` extra), or
``.venv/bin/python fuzz/wire_fuzz.py -atheris_runs=200000``.

Feeds arbitrary bytes to :class:`~openmsmq.wire.PacketDecoder` whole and one byte at a
time, and to :func:`~openmsmq.wire.decode_packet`. Any exception other than
:class:`~openmsmq.errors.WireError` is a bug, as is an accepted packet that does not
re-encode to the bytes it came from, or a different verdict for the two feeds (a read
that holds a malformed packet drops the whole packets before it in the same read).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

try:
    import atheris
except ImportError:  # only in the [fuzz] extra; the module stays importable without it
    atheris = None

_instrument: Any = atheris.instrument_imports() if atheris is not None else contextlib.nullcontext()
with _instrument:
    from openmsmq.errors import WireError
    from openmsmq.wire import PacketDecoder, decode_packet


def _feed(data: bytes, chunk: int) -> list[Any]:
    decoder = PacketDecoder()
    out: list[Any] = []
    try:
        for i in range(0, len(data), chunk):
            out.extend(decoder.feed(data[i : i + chunk]))
    except WireError:
        out.append("WireError")
    return out


def test_one_input(data: bytes) -> None:
    """The fuzz target: raises AssertionError (or anything but WireError) on a bug."""
    whole = _feed(data, max(len(data), 1))
    bytewise = _feed(data, 1)
    if "WireError" in whole or "WireError" in bytewise:
        # A read holding a malformed packet raises: the whole packets before it in that same
        # read are dropped with the session (nothing they carried was acknowledged, so the
        # peer resends it). Fed byte by byte, those packets came out of earlier reads.
        assert whole[-1] == bytewise[-1] == "WireError", (whole, bytewise)
        assert bytewise[: len(whole) - 1] == whole[:-1], (whole, bytewise)
    else:
        assert whole == bytewise, (whole, bytewise)
    accepted = b"".join(p.encode() for p in bytewise if p != "WireError")
    assert data.startswith(accepted)
    try:
        packet = decode_packet(data)
    except WireError:
        return
    assert packet.encode() == data


def seed_corpus(directory: Path) -> Path:
    """Write the spec's example frames (MS-MQQB 4.1) as the starting corpus, so the fuzzer
    begins from valid packets instead of having to discover the 16-byte BaseHeader."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.wire import frames

    directory.mkdir(parents=True, exist_ok=True)
    samples = {
        "establish_request": frames.FRAME3_ESTABLISH_REQUEST,
        "establish_response": frames.FRAME4_ESTABLISH_RESPONSE,
        "parameters_request": frames.FRAME5_PARAMETERS_REQUEST,
        "parameters_response": frames.FRAME6_PARAMETERS_RESPONSE,
        "user_message": frames.frame7_completed(),
        "session_ack": frames.FRAME8_SESSION_ACK,
    }
    for name, data in samples.items():
        (directory / name).write_bytes(data)
    return directory


def main(argv: list[str]) -> None:
    """Run atheris on :func:`test_one_input`; without a corpus directory argument, start from
    ``fuzz/corpus`` seeded with the spec's example frames."""
    if atheris is None:
        raise SystemExit("atheris is not installed: run `make fuzz` (pip install -e '.[fuzz]')")
    if not any(not a.startswith("-") for a in argv[1:]):
        argv = [*argv, str(seed_corpus(Path(__file__).resolve().parent / "corpus"))]
    # The editable install's import finder hides the package from instrument_imports():
    # instrument every loaded function instead, so coverage guides the fuzzer through the codecs.
    atheris.instrument_all()
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
