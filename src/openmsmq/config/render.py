"""The effective configuration written out: as TOML with each value's source
(:func:`render_config`, ``openmsmq config show``), and as a JSON document
(:func:`config_document`, ``config show --json`` and ``runtime.json``) that
:func:`loaded_from_document` reads back. A DSN is shown without its password.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from openmsmq.config.loading import LoadedConfig, load_config
from openmsmq.config.sections import SECTIONS, config_keys
from openmsmq.config.values import Route, fmt_number
from openmsmq.errors import ConfigError
from openmsmq.redact import redact

__all__ = ["config_document", "loaded_from_document", "render_config"]


def _toml_value(kind: str, value: Any) -> str:
    if kind == "dsn":
        value = redact(str(value))
    if value is None:
        return '"unlimited"' if kind == "quota" else '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "duration":
        return fmt_number(value) if float(value).is_integer() else repr(float(value))
    if isinstance(value, int):
        return str(value)
    if kind in ("networks", "peers", "hops"):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    if kind == "routes":
        return (
            "{ " + ", ".join(f"{json.dumps(r.destination)} = {json.dumps(r.next_hop)}" for r in value) + " }"
            if (value)
            else "{}"
        )
    return json.dumps(str(value), ensure_ascii=False)


def render_config(loaded: LoadedConfig) -> str:
    """The effective configuration as TOML, each value followed by ``# <source>``.

    The output loads back (as a file) to the same configuration.
    """
    lines = ["# openmsmq effective configuration (value  # source)"]
    for section in SECTIONS:
        lines += ["", f"[{section}]"]
        section_values = getattr(loaded.config, section)
        for f in fields(SECTIONS[section]):
            dotted = f"{section}.{f.name}"
            text = _toml_value(f.metadata["kind"], getattr(section_values, f.name))
            lines.append(f"{f.name} = {text}  # {loaded.sources.get(dotted, 'default')}")
    return "\n".join(lines) + "\n"


def _json_value(kind: str, value: Any) -> Any:
    """A configuration value as JSON, spelled as the TOML file would spell it (a DSN
    without its password)."""
    if kind == "dsn":
        return redact(str(value))
    if value is None:
        return "unlimited" if kind == "quota" else None
    if isinstance(value, Path):
        return str(value)
    if kind == "routes":
        return {r.destination: r.next_hop for r in value if isinstance(r, Route)}
    if isinstance(value, tuple):
        return list(value)
    return value


def config_document(loaded: LoadedConfig) -> dict[str, Any]:
    """``{"file": ..., "config": {section: {key: value}}, "sources": {"section.key": source}}``:
    ``openmsmq config show --json``, and what ``openmsmq serve`` publishes in its
    runtime.json so that ``config show`` can show a running queue manager's own."""
    sections: dict[str, dict[str, Any]] = {}
    for key in config_keys():
        value = getattr(getattr(loaded.config, key.section), key.name)
        sections.setdefault(key.section, {})[key.name] = _json_value(key.kind, value)
    return {
        "file": str(loaded.path) if loaded.path is not None else None,
        "config": sections,
        "sources": {k.dotted: loaded.sources.get(k.dotted, "default") for k in config_keys()},
    }


def loaded_from_document(doc: Mapping[str, Any]) -> LoadedConfig:
    """The :class:`LoadedConfig` a :func:`config_document` describes (values checked again
    as flags are; a key the document lacks keeps its default). ConfigError when the
    document is not one."""
    try:
        sections = doc["config"]
        flat = {f"{s}.{k}": v for s, table in sections.items() for k, v in table.items()}
        sources = {str(k): str(v) for k, v in doc.get("sources", {}).items()}
        path = doc.get("file")
    except (KeyError, AttributeError, TypeError) as exc:
        raise ConfigError("runtime", f"not a configuration document: {exc}") from None
    values = load_config(None, {}, flat)
    return LoadedConfig(values.config, {**values.sources, **sources}, Path(path) if path else None)
