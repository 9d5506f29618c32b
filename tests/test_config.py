from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import autoprof
from autoprof import config
from autoprof.config import ConfigError, from_env, parse_bool


@pytest.mark.parametrize("raw,expected", [("true", True), ("TRUE", True), ("False", False), ("false", False)])
def test_parse_bool_accepts_only_true_false(raw: str, expected: bool) -> None:
    assert parse_bool("X", raw, not expected) is expected


@pytest.mark.parametrize("raw", ["1", "yes", "on", "0", "tru"])
def test_parse_bool_other_values_warn_once_and_keep_default(raw: str) -> None:
    config._warned.clear()
    with pytest.warns(RuntimeWarning, match="not 'true' or 'false'"):
        assert parse_bool("AUTOPROF_X", raw, False) is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_bool("AUTOPROF_X", raw, True) is True  # no second warning


def test_from_env_reads_switches_and_schedule() -> None:
    cfg = from_env({"AUTOPROF_DISABLE": "true", "AUTOPROF_LOG": "/tmp/x.jsonl", "AUTOPROF_ACTIVE": "5", "AUTOPROF_WAIT": "0"})
    assert cfg.enabled is False
    assert cfg.sink == "/tmp/x.jsonl"
    assert (cfg.active, cfg.wait) == (5, 0)


def test_a_relative_sink_or_trace_dir_is_of_where_it_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = from_env({"AUTOPROF_LOG": "r.jsonl", "AUTOPROF_TRACE_DIR": "t"})
    given = cfg.replace(sink=Path("s") / "r2.jsonl")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # a later chdir (Hydra's) moves nothing
    assert (cfg.sink, cfg.trace_dir, given.sink) == (str(tmp_path / "r.jsonl"), str(tmp_path / "t"), str(tmp_path / "s" / "r2.jsonl"))
    assert cfg.replace(active=2).sink == str(tmp_path / "r.jsonl")


def test_from_env_bad_int_warns_and_keeps_default() -> None:
    config._warned.clear()
    with pytest.warns(RuntimeWarning, match="AUTOPROF_ACTIVE"):
        cfg = from_env({"AUTOPROF_ACTIVE": "zero"})
    assert cfg.active == config.DEFAULT_ACTIVE


def test_configure_rejects_bad_options_with_one_line_and_changes_nothing() -> None:
    before = config.SWITCH.config
    with pytest.raises(ConfigError) as e:
        autoprof.configure(active=0)
    assert "\n" not in str(e.value) and "active" in str(e.value)
    with pytest.raises(ConfigError, match="unknown option"):
        autoprof.configure(bogus=1)
    assert config.SWITCH.config is before


def test_configure_enabled_false_switches_off() -> None:
    autoprof.configure(enabled=False)
    assert config.SWITCH.enabled is False
    autoprof.configure(enabled=True)
    assert config.SWITCH.enabled is True


def test_public_face_is_sorted_and_complete() -> None:
    assert autoprof.__all__ == sorted(autoprof.__all__)
    for name in autoprof.__all__:
        assert hasattr(autoprof, name), name
    from autoprof import autoprof as deco

    assert callable(deco) and callable(autoprof)


@pytest.mark.parametrize(
    "name,raw,key",
    [
        ("AUTOPROF_RANKS", "99999999999", "ranks"),  # was accepted, then every configure() raised about ranks
        ("AUTOPROF_RANKS", "0,-1", "ranks"),
        ("AUTOPROF_ACTIVE", "0", "active"),
        ("AUTOPROF_NOISE_FLOOR", "nan", "noise_floor"),
        ("AUTOPROF_CROSS_RANK_TIMEOUT", "1e400", "cross_rank_timeout_s"),
        ("AUTOPROF_WAIT", "1" * 5000, "wait"),
    ],
)
def test_a_bad_environment_value_never_reaches_the_config(name: str, raw: str, key: str) -> None:
    config._warned.discard(name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = from_env({name: raw})
    assert getattr(cfg, key) == getattr(config.Config(), key)  # the default
    assert len(caught) == 1 and name in str(caught[0].message) and "rejected" in str(caught[0].message)
    assert caught[0].filename == __file__  # at the caller's line, not autoprof's
    cfg.replace(wait=2)  # and every later change still validates


def test_environment_and_configure_share_one_validator_per_field() -> None:
    with pytest.raises(ConfigError, match="ranks must be"):
        autoprof.configure(ranks=[99999999999])
    with pytest.raises(ConfigError, match="sink must be a non-empty path"):
        autoprof.configure(sink=" ")


def test_a_blank_log_path_is_no_file() -> None:
    assert from_env({"AUTOPROF_LOG": " "}).sink is None  # not a file named " "
