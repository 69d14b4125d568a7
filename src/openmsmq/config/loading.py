"""Loading the configuration: defaults < TOML file < ``OPENMSMQ_*`` environment < flags.

:func:`load_config` builds a :class:`LoadedConfig`, each value converted by
:func:`openmsmq.config.values.convert` as its key's declaration says and the whole checked
by :func:`openmsmq.config.rules.check_consistency`; :func:`with_overrides` replaces some
values of a configuration, checked the same way. Both turn a key into a section field
through ``_convert_key``, which owns the unknown-key message.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from openmsmq.config.rules import check_consistency
from openmsmq.config.schema import ENV_PREFIX, KeyInfo, key_meta
from openmsmq.config.sections import SECTIONS, Config, config_keys
from openmsmq.config.values import convert
from openmsmq.errors import ConfigError, quoted

__all__ = ["LoadedConfig", "load_config", "with_overrides"]


@dataclass(frozen=True)
class LoadedConfig:
    """A configuration and where each value came from (dotted key -> source)."""

    config: Config
    sources: Mapping[str, str]
    path: Path | None = None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError("file", f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("file", f"{path} is not valid TOML: {exc}") from None


def _check_section(section: str, source: str) -> None:
    """ConfigError unless ``section`` is a section of the configuration; the message names
    ``source`` (``file:<path>``, ``with_overrides``) and the sections there are."""
    if section not in SECTIONS:
        raise ConfigError(section, f"unknown section (from {source}); sections: {', '.join(SECTIONS)}")


def _convert_key(section: str, name: str, raw: object, source: str, from_text: bool) -> Any:
    """The value of key ``section.name`` (a known section) from ``raw``, converted as the key's
    declaration says (:func:`openmsmq.config.values.convert`; ``from_text``: ``raw`` came
    as text, from the environment or a flag). An unknown key is a ConfigError naming the
    dotted key, ``source`` and the section's keys: the one place that turns a file, an
    environment variable, a flag or a :func:`with_overrides` item into a section field."""
    dotted = f"{section}.{name}"
    meta = key_meta(SECTIONS[section], name)
    if meta is None:
        known = ", ".join(f.name for f in fields(SECTIONS[section]))
        raise ConfigError(dotted, f"unknown key (from {source}); [{section}] has: {known}")
    return convert(dotted, meta["kind"], meta, raw, from_text)


def load_config(
    path: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> LoadedConfig:
    """Build the configuration: defaults, then the TOML file at ``path``, then ``env``
    (``OPENMSMQ_<SECTION>_<KEY>``), then ``overrides`` (dotted keys from CLI flags).

    Raises ConfigError(key, message) for an unreadable file, an unknown section or key,
    or a value of the wrong type or out of range.
    """
    values: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    sources: dict[str, str] = {k.dotted: "default" for k in config_keys()}

    def put(section: str, name: str, raw: object, source: str, from_text: bool) -> None:
        values[section][name] = _convert_key(section, name, raw, source, from_text)
        sources[f"{section}.{name}"] = source

    file_path = Path(path) if path is not None else None
    if file_path is not None:
        data = _read_file(file_path)
        for section, table in data.items():
            _check_section(section, f"file:{file_path}")
            if not isinstance(table, dict):
                raise ConfigError(
                    section, f"expected a [{section}] table in {file_path}, got {quoted(table)}"
                )
            for name, raw in table.items():
                put(section, name, raw, f"file:{file_path}", False)

    for var in sorted(env or {}):
        if not var.startswith(ENV_PREFIX):
            continue
        section, _, name = var[len(ENV_PREFIX) :].lower().partition("_")
        if section not in SECTIONS or not name:
            # not configuration: OPENMSMQ_CONFIG, OPENMSMQ_QM (the command line's --qm), test knobs
            continue
        put(section, name, (env or {})[var], f"env:{var}", True)

    for dotted, raw in (overrides or {}).items():
        if raw is None:
            continue
        section, dot, name = dotted.partition(".")
        if not dot or section not in SECTIONS:
            raise ConfigError(
                dotted, f"unknown key; keys look like qm.data_dir (sections: {', '.join(SECTIONS)})"
            )
        put(section, name, raw, "flag:" + KeyInfo(section, name, "", None, "", "").flag, True)

    config = Config(**{s: SECTIONS[s](**values[s]) for s in SECTIONS})
    check_consistency(config)
    return LoadedConfig(config, dict(sources), file_path)


def with_overrides(config: Config, **sections: Mapping[str, Any]) -> Config:
    """A copy of ``config`` with some values replaced, validated like flags (for tests and embedding).

    ``with_overrides(cfg, mqqb={"port": 0})``.
    """
    new = config
    for section, items in sections.items():
        _check_section(section, "with_overrides")
        converted = {n: _convert_key(section, n, raw, "with_overrides", True) for n, raw in items.items()}
        new = replace(new, **{section: replace(getattr(new, section), **converted)})
    check_consistency(new)
    return new
