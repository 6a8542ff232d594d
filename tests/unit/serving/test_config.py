"""TF Serving's text-proto configuration files: the model config list and batching parameters.

Known answers from TF Serving's documented examples, errors with their line numbers, and a
Hypothesis round trip: any config written out in text format parses back to the same values.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytfrt.serving.config import (
    DEFAULT_METRICS_PATH,
    BatchingParameters,
    ConfigError,
    MonitoringConfig,
    VersionPolicy,
    parse_batching_parameters,
    parse_model_config,
    parse_monitoring_config,
    parse_text_proto,
)

TF_SERVING_EXAMPLE = """
model_config_list {
  config {
    name: 'my_first_model'
    base_path: '/tmp/my_first_model/'
    model_platform: 'tensorflow'
  }
  config {
    name: "my_second_model"
    base_path: "/tmp/my_second_model/"
    model_platform: "tensorflow"
    model_version_policy {
      specific {
        versions: 42
        versions: 43
      }
    }
    version_labels {
      key: 'stable'
      value: 42
    }
    version_labels {
      key: 'canary'
      value: 43
    }
  }
}
"""


def test_the_documented_example() -> None:
    first, second = parse_model_config(TF_SERVING_EXAMPLE)
    assert first.name == "my_first_model"
    assert first.base_path == Path("/tmp/my_first_model")
    assert first.model_platform == "tensorflow"
    assert first.version_policy == VersionPolicy("latest", num_versions=1)
    assert second.version_policy == VersionPolicy("specific", versions=(42, 43))
    assert second.version_labels == {"stable": 42, "canary": 43}


def test_policies_select_versions() -> None:
    available = [3, 1, 7, 5]
    assert VersionPolicy().select(available) == [7]
    assert VersionPolicy("latest", num_versions=2).select(available) == [7, 5]
    assert VersionPolicy("all").select(available) == [7, 5, 3, 1]
    assert VersionPolicy("specific", versions=(1, 5, 9)).select(available) == [5, 1]
    assert VersionPolicy().select([]) == []


def test_policy_forms_parse() -> None:
    text = """model_config_list {
        config { name: "a" base_path: "/a" model_version_policy { all {} } }
        config { name: "b" base_path: "/b" model_version_policy: { latest: { num_versions: 3 } } }
    }"""
    a, b = parse_model_config(text)
    assert a.version_policy.kind == "all"
    assert b.version_policy == VersionPolicy("latest", num_versions=3)


def test_relative_base_path_is_relative_to_the_config(tmp_path: Path) -> None:
    (config,) = parse_model_config('model_config_list { config { name: "m" base_path: "m" } }',
                                   relative_to=tmp_path)
    assert config.base_path == tmp_path / "m"


@pytest.mark.parametrize("text,words", [
    ('model_config_list { config { name: "a" base_path: "/a" colour: 2 } }',
     "unsupported field 'colour'"),
    ('model_config_list { config { name: "a" base_path: "/a" }\n', "unexpected end of file"),
    ('model_config_list {\n config {\n name: "a"\n base_path: 3 } }', "base_path of model 'a'"),
    ('model_config_list { config { name: "a" base_path: "/a" model_platform: "caffe" } }',
     "unknown model_platform 'caffe'"),
    ('model_config_list { config { name: "a" base_path: "/a" } config { name: "a" '
     'base_path: "/b" } }', "given more than once: a"),
    ("model_config_list { }", "holds no config"),
    ('model_config_list { config { name: "a" base_path: "/a" model_version_policy { '
     "latest { num_versions: 0 } } } }", "must be positive"),
    ('model_config_list { config { name: "a" base_path: "/a" model_version_policy { '
     "specific { } } } }", "at least one 'versions'"),
    ("model_config_list { config { name \"a\" } }", "expected ':' after 'name'"),
    ("model_config_list { config { name: @ } }", "unexpected character '@'"),
])
def test_errors_name_the_problem(text: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_model_config(text, "models.config")
    assert words in str(info.value)
    assert str(info.value).startswith("models.config")


def test_syntax_errors_carry_the_line() -> None:
    with pytest.raises(ConfigError, match=r"^f:3: expected a field name"):
        parse_text_proto("a: 1\nb: 2\n: 3\n", "f")


def test_batching_parameters_both_spellings() -> None:
    wrapped = parse_batching_parameters("""
        max_batch_size { value: 128 }
        batch_timeout_micros { value: 0 }
        max_enqueued_batches { value: 1000000 }
        num_batch_threads { value: 8 }
    """)
    assert wrapped == BatchingParameters(128, 0, 8, 1000000)
    plain = parse_batching_parameters("max_batch_size: 4  # comment\nnum_batch_threads: 1")
    assert plain == BatchingParameters(max_batch_size=4, num_batch_threads=1)


@pytest.mark.parametrize("text,words", [
    ("max_batch_size { value: 0 }", "must be positive"),
    ("batch_timeout_micros: -1", "must not be negative"),
    ("pad_variable_length_inputs: true", "unsupported field"),
    ('max_batch_size: "8"', "must be an integer"),
])
def test_batching_parameter_errors(text: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_batching_parameters(text)


names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1,
                max_size=12)


@given(
    entries=st.lists(
        st.tuples(names, names, st.sampled_from([None, "tensorflow", "onnx", "pytfrt"]),
                  st.one_of(st.integers(1, 5).map(lambda n: ("latest", n)),
                            st.just(("all", 0)),
                            st.lists(st.integers(0, 10**6), min_size=1, max_size=4)
                            .map(lambda v: ("specific", tuple(v)))),
                  st.dictionaries(names, st.integers(0, 10**9), max_size=3)),
        min_size=1, max_size=4, unique_by=lambda e: e[0]),
)
def test_written_configs_parse_back(entries: list[tuple]) -> None:
    def quote(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    blocks = []
    for name, base, platform, (kind, arg), labels in entries:
        lines = [f"name: {quote(name)}", f"base_path: {quote('/' + base)}"]
        if platform:
            lines.append(f"model_platform: {quote(platform)}")
        if kind == "latest":
            lines.append(f"model_version_policy {{ latest {{ num_versions: {arg} }} }}")
        elif kind == "all":
            lines.append("model_version_policy { all {} }")
        else:
            versions = " ".join(f"versions: {v}" for v in arg)
            lines.append(f"model_version_policy {{ specific {{ {versions} }} }}")
        lines += [f"version_labels {{ key: {quote(k)} value: {v} }}" for k, v in labels.items()]
        blocks.append("config {\n  " + "\n  ".join(lines) + "\n}")
    configs = parse_model_config("model_config_list {\n" + "\n".join(blocks) + "\n}")
    for config, (name, base, platform, (kind, arg), labels) in zip(configs, entries, strict=True):
        assert config.name == name
        assert config.base_path == Path("/" + base)
        assert config.model_platform == platform
        assert config.version_policy.kind == kind
        if kind == "latest":
            assert config.version_policy.num_versions == arg
        if kind == "specific":
            assert config.version_policy.versions == arg
        assert config.version_labels == labels


@pytest.mark.parametrize("text, want", [
    ('prometheus_config { enable: true, path: "/m" }', MonitoringConfig(True, "/m")),
    ("prometheus_config { enable: true }", MonitoringConfig(True, DEFAULT_METRICS_PATH)),
    ("prometheus_config { }", MonitoringConfig(False, DEFAULT_METRICS_PATH)),  # TF's default
    ("", MonitoringConfig(False, DEFAULT_METRICS_PATH)),
])
def test_monitoring_config(text: str, want: MonitoringConfig) -> None:
    assert parse_monitoring_config(text) == want


@pytest.mark.parametrize("text, message", [
    ("prometheus_config { enable: 1 }", "enable must be true or false"),
    ('prometheus_config { path: "m" }', "must start with '/'"),
    ("prometheus_config { port: 9 }", "unsupported field 'port'"),
    ("other_config { }", "unsupported field 'other_config'"),
])
def test_monitoring_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_monitoring_config(text)
