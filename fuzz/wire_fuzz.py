"""Coverage-guided fuzzing of the wire decoders with atheris.

Run: ``make fuzz`` (installs the ``[fuzz]`` extra), or
``.venv/bin/python fuzz/wire_fuzz.py -atheris_runs=200000``.

Feeds arbitrary bytes to :class:`~openmsmq.wire.PacketDecoder` whole and one byte at a
time, and to :func:`~openmsmq.wire.decode_packet`. Any exception other than
:class:`~openmsmq.errors.WireError` is a bug, as is an accepted packet that does not
re-encode to the bytes it came from, or a different verdict for the two feeds.
"""

from __future__ import annotations

import contextlib
import sys
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
    assert whole == bytewise, (whole, bytewise)
    accepted = b"".join(p.encode() for p in whole if p != "WireError")
    assert data.startswith(accepted)
    try:
        packet = decode_packet(data)
    except WireError:
        return
    assert packet.encode() == data


def main(argv: list[str]) -> None:
    """Run atheris on :func:`test_one_input`."""
    if atheris is None:
        raise SystemExit("atheris is not installed: run `make fuzz` (pip install -e '.[fuzz]')")
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
