"""Server configuration: TensorFlow Serving's text-proto files and the parsed settings.

Two files of ``tensorflow_model_server`` are read, in protobuf text format:

* ``--model_config_file``: a ``model_config_list`` of ``config`` entries.  The subset parsed is
  ``name``, ``base_path``, ``model_platform``, ``model_version_policy`` (``latest {num_versions}``,
  ``all {}``, ``specific {versions ...}``) and ``version_labels {key value}``; any other field
  is an error naming it (never silently ignored).
* ``--batching_parameters_file``: ``max_batch_size``, ``batch_timeout_micros``,
  ``num_batch_threads``, ``max_enqueued_batches``, each written ``name { value: N }`` (the
  ``Int64Value`` wrapper TF Serving uses) or ``name: N``.

Grammar of the text format accepted (:func:`parse_text_proto`)::

    message := field*
    field   := NAME ':' scalar | NAME ':'? '{' message '}' | NAME ':' '[' scalar (',' scalar)* ']'
    scalar  := STRING ('...' or "...", C escapes) | NUMBER | IDENT (enum or true/false)

``#`` starts a comment to the end of the line; fields may be separated by ``,`` or ``;``.
Errors raise :class:`ConfigError` with ``file:line: message``.  Everything here is pure and
thread-safe.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pytfrt.support.errors import PytfrtError

Scalar = str | int | float | bool
Message = list[tuple[str, "Scalar | Message"]]
"""A parsed message: its fields in file order (a repeated field appears once per value)."""

MODEL_PLATFORMS: Final = ("tensorflow", "onnx", "pytfrt")
"""``model_platform`` values: the on-disk format expected under each version directory."""


class ConfigError(PytfrtError, ValueError):
    """A configuration file or flag that cannot be used (the message says where and why)."""


# -- the text format --------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>[ \t\r\n]+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<number>[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?[fF]?|[-+]?(?:inf|nan)\b)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}:\[\],;<>])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str
    line: int


def _tokenize(text: str, source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, line = 0, 1
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ConfigError(f"{source}:{line}: unexpected character {text[pos]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append(_Token(kind, match.group(), line))
        line += match.group().count("\n")
        pos = match.end()
    return tokens


def _scalar(token: _Token, source: str) -> Scalar:
    if token.kind == "string":
        try:
            value = ast.literal_eval(token.text)
        except (SyntaxError, ValueError) as exc:
            raise ConfigError(f"{source}:{token.line}: bad string {token.text}: {exc}") from None
        return str(value)
    if token.kind == "number":
        text = token.text.rstrip("fF") if not token.text.endswith("inf") else token.text
        try:
            return int(text)
        except ValueError:
            return float(text)
    if token.kind == "ident":
        if token.text in ("true", "True"):
            return True
        if token.text in ("false", "False"):
            return False
        return token.text
    raise ConfigError(f"{source}:{token.line}: expected a value, got {token.text!r}")


def parse_text_proto(text: str, source: str = "<text>") -> Message:
    """Parse protobuf text format into nested ``(name, value)`` lists (see the module grammar).

    Raises:
        ConfigError: on a syntax error, with ``source:line``.
    """
    tokens = _tokenize(text, source)
    pos = 0

    def peek() -> _Token | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> _Token:
        nonlocal pos
        if pos >= len(tokens):
            last = tokens[-1].line if tokens else 1
            raise ConfigError(f"{source}:{last}: unexpected end of file")
        pos += 1
        return tokens[pos - 1]

    def message(closing: str | None) -> Message:
        fields: Message = []
        while True:
            tok = peek()
            if tok is None:
                if closing is not None:
                    take()  # raises: unexpected end of file
                return fields
            if closing is not None and tok.text == closing:
                take()
                return fields
            if tok.text in (",", ";"):
                take()
                continue
            name = take()
            if name.kind != "ident":
                raise ConfigError(f"{source}:{name.line}: expected a field name, got {name.text!r}")
            nxt = take()
            if nxt.text == ":":
                nxt = take()
                if nxt.text == "[":
                    fields.extend((name.text, value) for value in scalar_list())
                    continue
            if nxt.text in ("{", "<"):
                fields.append((name.text, message("}" if nxt.text == "{" else ">")))
            else:
                if tokens[pos - 2].text != ":":
                    raise ConfigError(f"{source}:{nxt.line}: expected ':' after {name.text!r}")
                fields.append((name.text, _scalar(nxt, source)))

    def scalar_list() -> list[Scalar]:
        values: list[Scalar] = []
        while True:
            tok = take()
            if tok.text == "]":
                return values
            if tok.text == ",":
                continue
            values.append(_scalar(tok, source))

    return message(None)


def _one(fields: Message, name: str, source: str) -> Scalar | Message | None:
    values = [v for k, v in fields if k == name]
    if len(values) > 1:
        raise ConfigError(f"{source}: field '{name}' given {len(values)} times")
    return values[0] if values else None


def _check_known(fields: Message, known: set[str], where: str, source: str) -> None:
    for key, _ in fields:
        if key not in known:
            raise ConfigError(
                f"{source}: unsupported field '{key}' in {where} "
                f"(supported: {', '.join(sorted(known))})"
            )


def _int(value: Scalar | Message | None, what: str, source: str) -> int:
    if isinstance(value, list):  # Int64Value wrapper: { value: N }
        _check_known(value, {"value"}, what, source)
        value = _one(value, "value", source)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{source}: {what} must be an integer, got {value!r}")
    return value


def _str(value: Scalar | Message | None, what: str, source: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{source}: {what} must be a string, got {value!r}")
    return value


# -- model configs ----------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionPolicy:
    """Which versions of a model to serve (TF Serving's ``ServableVersionPolicy``)."""

    kind: str = "latest"
    """``"latest"``, ``"all"`` or ``"specific"``."""
    num_versions: int = 1
    """For ``latest``: how many of the highest versions to serve."""
    versions: tuple[int, ...] = ()
    """For ``specific``: the versions to serve."""

    def select(self, available: list[int]) -> list[int]:
        """The versions to serve among ``available`` (any order), highest first."""
        ordered = sorted(set(available), reverse=True)
        if self.kind == "all":
            return ordered
        if self.kind == "specific":
            return [v for v in ordered if v in self.versions]
        return ordered[: self.num_versions]


@dataclass(frozen=True)
class ModelConfig:
    """One model to serve: its name, base path, platform, version policy and labels."""

    name: str
    base_path: Path
    model_platform: str | None = None
    """``tensorflow`` (SavedModel), ``onnx`` or ``pytfrt`` (compiled directory); ``None``:
    whatever each version directory holds."""
    version_policy: VersionPolicy = field(default_factory=VersionPolicy)
    version_labels: dict[str, int] = field(default_factory=dict)


def _version_policy(fields: Message, source: str) -> VersionPolicy:
    _check_known(fields, {"latest", "all", "specific"}, "model_version_policy", source)
    if len(fields) != 1 or not isinstance(fields[0][1], list):
        raise ConfigError(
            f"{source}: model_version_policy needs exactly one of latest, all or specific"
        )
    kind, body = fields[0]
    assert isinstance(body, list)
    if kind == "latest":
        _check_known(body, {"num_versions"}, "latest", source)
        raw = _one(body, "num_versions", source)
        num = 1 if raw is None else _int(raw, "num_versions", source)
        if num < 1:
            raise ConfigError(f"{source}: latest.num_versions must be positive, got {num}")
        return VersionPolicy("latest", num_versions=num)
    if kind == "all":
        _check_known(body, set(), "all", source)
        return VersionPolicy("all")
    _check_known(body, {"versions"}, "specific", source)
    versions = tuple(_int(v, "specific.versions", source) for k, v in body if k == "versions")
    if not versions:
        raise ConfigError(f"{source}: specific needs at least one 'versions' entry")
    return VersionPolicy("specific", versions=versions)


def _model_config(fields: Message, source: str, relative_to: Path) -> ModelConfig:
    known = {"name", "base_path", "model_platform", "model_version_policy", "version_labels"}
    _check_known(fields, known, "config", source)
    name = _str(_one(fields, "name", source), "config.name", source)
    base = Path(_str(_one(fields, "base_path", source), f"base_path of model '{name}'", source))
    if not base.is_absolute():
        base = relative_to / base
    platform = _one(fields, "model_platform", source)
    if platform is not None:
        platform = _str(platform, "model_platform", source)
        if platform not in MODEL_PLATFORMS:
            raise ConfigError(
                f"{source}: model '{name}': unknown model_platform {platform!r} "
                f"(expected one of {', '.join(MODEL_PLATFORMS)})"
            )
    policy_fields = _one(fields, "model_version_policy", source)
    if policy_fields is not None and not isinstance(policy_fields, list):
        raise ConfigError(f"{source}: model_version_policy must be a message")
    policy = VersionPolicy() if policy_fields is None else _version_policy(policy_fields, source)
    labels: dict[str, int] = {}
    for key, entry in fields:
        if key != "version_labels":
            continue
        if not isinstance(entry, list):
            raise ConfigError(f"{source}: version_labels must be a message")
        _check_known(entry, {"key", "value"}, "version_labels", source)
        label = _str(_one(entry, "key", source), "version_labels.key", source)
        labels[label] = _int(_one(entry, "value", source), "version_labels.value", source)
    return ModelConfig(name, base, platform, policy, labels)


def parse_model_config(text: str, source: str = "<model_config>",
                       relative_to: Path | None = None) -> list[ModelConfig]:
    """Parse a ``model_config_list`` text proto into :class:`ModelConfig` entries.

    Relative ``base_path`` values are taken relative to ``relative_to`` (default: the cwd).

    Raises:
        ConfigError: on a syntax error, an unsupported field, a duplicate model name or an
            empty list.
    """
    fields = parse_text_proto(text, source)
    _check_known(fields, {"model_config_list"}, "the file", source)
    body = _one(fields, "model_config_list", source)
    if not isinstance(body, list):
        raise ConfigError(f"{source}: expected 'model_config_list {{ config {{ ... }} }}'")
    _check_known(body, {"config"}, "model_config_list", source)
    configs = []
    for _, entry in body:
        if not isinstance(entry, list):
            raise ConfigError(f"{source}: 'config' must be a message")
        configs.append(_model_config(entry, source, relative_to or Path.cwd()))
    if not configs:
        raise ConfigError(f"{source}: model_config_list holds no config")
    names = [c.name for c in configs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{source}: model name(s) given more than once: {', '.join(duplicates)}")
    return configs


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {path}: {exc.strerror}") from None


def load_model_config(path: str | Path) -> list[ModelConfig]:
    """Read and parse a ``--model_config_file`` (see :func:`parse_model_config`)."""
    path = Path(path)
    return parse_model_config(_read(path, "model config"), str(path), path.resolve().parent)


# -- batching parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchingParameters:
    """Dynamic batching settings (the subset of TF Serving's ``BatchingParameters`` used)."""

    max_batch_size: int = 32
    """The most rows (0-th dimension summed over the merged requests) in one batch."""
    batch_timeout_micros: int = 0
    """How long the first request of a batch may wait for others before the batch runs (0, TF's
    default: run as soon as a batch slot is free -- batches still grow while every slot is
    busy, so the load sets the batch size)."""
    num_batch_threads: int = 2
    """How many batches of one model may run at the same time."""
    max_enqueued_batches: int = 64
    """How many full batches may wait for a free batch thread; beyond, requests are refused
    with ``UNAVAILABLE`` (HTTP 503)."""

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
            if getattr(self, name) < 1:
                raise ConfigError(f"batching parameter {name} must be positive")
        if self.batch_timeout_micros < 0:
            raise ConfigError("batching parameter batch_timeout_micros must not be negative")


def parse_batching_parameters(text: str, source: str = "<batching>") -> BatchingParameters:
    """Parse a ``--batching_parameters_file`` (fields not given keep their defaults).

    Raises:
        ConfigError: on a syntax error, an unsupported field or a bad value.
    """
    fields = parse_text_proto(text, source)
    known = {"max_batch_size", "batch_timeout_micros", "num_batch_threads",
             "max_enqueued_batches"}
    _check_known(fields, known, "the batching parameters", source)
    values = {}
    for name in known:
        raw = _one(fields, name, source)
        if raw is not None:
            values[name] = _int(raw, name, source)
    return BatchingParameters(**values)


def load_batching_parameters(path: str | Path) -> BatchingParameters:
    """Read and parse a ``--batching_parameters_file``."""
    return parse_batching_parameters(_read(Path(path), "batching parameters"), str(path))


# -- monitoring -----------------------------------------------------------------------------------

DEFAULT_METRICS_PATH: Final = "/monitoring/prometheus/metrics"


@dataclass(frozen=True)
class MonitoringConfig:
    """Where the Prometheus metrics are served (TF Serving's ``MonitoringConfig``)."""

    enable: bool = True
    """Serve the metrics at all (TF Serving's default without a file is off; pytfrt serve's is
    on, at :data:`DEFAULT_METRICS_PATH`)."""
    path: str = DEFAULT_METRICS_PATH


def parse_monitoring_config(text: str, source: str = "<monitoring>") -> MonitoringConfig:
    """Parse a ``--monitoring_config_file``: ``prometheus_config { enable: B path: "P" }``.

    As in TF Serving, ``enable`` defaults to false and ``path`` to :data:`DEFAULT_METRICS_PATH`
    when the file gives a ``prometheus_config``.

    Raises:
        ConfigError: on a syntax error, an unsupported field or a path not starting with ``/``.
    """
    fields = parse_text_proto(text, source)
    _check_known(fields, {"prometheus_config"}, "the monitoring config", source)
    body = _one(fields, "prometheus_config", source)
    if body is None:
        return MonitoringConfig(enable=False)
    if not isinstance(body, list):
        raise ConfigError(f"{source}: prometheus_config must be a message")
    _check_known(body, {"enable", "path"}, "prometheus_config", source)
    enable = _one(body, "enable", source)
    if enable is not None and not isinstance(enable, bool):
        raise ConfigError(f"{source}: prometheus_config.enable must be true or false")
    path = _one(body, "path", source)
    path = DEFAULT_METRICS_PATH if path is None else _str(path, "prometheus_config.path",
                                                            source)
    if not path.startswith("/"):
        raise ConfigError(f"{source}: prometheus_config.path must start with '/', got {path!r}")
    return MonitoringConfig(bool(enable), path)


def load_monitoring_config(path: str | Path) -> MonitoringConfig:
    """Read and parse a ``--monitoring_config_file``."""
    return parse_monitoring_config(_read(Path(path), "monitoring config"), str(path))
