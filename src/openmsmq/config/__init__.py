"""Queue-manager configuration: defaults < TOML file < ``OPENMSMQ_*`` environment < flags.

``load_config(path, env, overrides)`` returns a :class:`LoadedConfig` whose ``config`` is
a frozen :class:`Config` tree and whose ``sources`` maps every dotted key (``mqqb.port``)
to where its value came from: ``"default"``, ``"file:<path>"``, ``"env:OPENMSMQ_MQQB_PORT"``
or ``"flag:--mqqb-port"``. ``render_config(loaded)`` prints the effective configuration as
TOML with each value's source as a trailing comment (``openmsmq config show``).

Every key is declared once, as a dataclass field of :mod:`openmsmq.config.sections` with
its default, kind and documentation in ``metadata``; the loader, the renderer and
``docs/configuration.md`` follow that table. A bad value, an unknown key or an unknown section raises
``ConfigError(key, message)`` naming the dotted key and what was expected.

* Environment: ``OPENMSMQ_<SECTION>_<KEY>`` (upper case), e.g. ``OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT``.
  A variable whose first word after ``OPENMSMQ_`` is a section name must name a known key;
  other ``OPENMSMQ_*`` variables (``OPENMSMQ_CONFIG``, ``OPENMSMQ_QM``, test knobs) are not
  configuration.
* Flags: the CLI passes ``{"mqqb.port": 1802, ...}``; ``None`` values (flag not given) are skipped.
* Durations: seconds as a number, or a string ``"500ms"``, ``"5s"``, ``"2m"``, ``"1h"``.
  Sizes: bytes as an integer, or ``"512KiB"``, ``"4MiB"``, ``"1GiB"``.
* Relative paths are relative to the working directory of the process.

The package, by concept: :mod:`~openmsmq.config.schema` (how a key is declared),
:mod:`~openmsmq.config.sections` (the keys), :mod:`~openmsmq.config.values` (checking and
converting one value), :mod:`~openmsmq.config.rules` (rules between keys),
:mod:`~openmsmq.config.loading` (defaults, file, environment, flags) and
:mod:`~openmsmq.config.render` (TOML and JSON output). Besides the standard library they
import only :mod:`openmsmq.errors` and :mod:`openmsmq.redact`.
"""

from __future__ import annotations

from openmsmq.config.loading import LoadedConfig, load_config, with_overrides
from openmsmq.config.render import config_document, loaded_from_document, render_config
from openmsmq.config.schema import ENV_PREFIX, KeyInfo
from openmsmq.config.sections import (
    Config,
    ConsoleConfig,
    HaConfig,
    LogConfig,
    MetricsConfig,
    MqqbConfig,
    ProtocolConfig,
    QmConfig,
    RemoteConfig,
    StoreConfig,
    config_keys,
)
from openmsmq.config.values import Route, parse_duration, parse_size

__all__ = [
    "ENV_PREFIX",
    "Config",
    "ConsoleConfig",
    "HaConfig",
    "KeyInfo",
    "LoadedConfig",
    "LogConfig",
    "MetricsConfig",
    "MqqbConfig",
    "ProtocolConfig",
    "QmConfig",
    "RemoteConfig",
    "Route",
    "StoreConfig",
    "config_document",
    "config_keys",
    "load_config",
    "loaded_from_document",
    "parse_duration",
    "parse_size",
    "render_config",
    "with_overrides",
]
