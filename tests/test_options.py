"""Every option is declared once, as a :class:`autoprof.config.Config` field made by ``config.option`` (its default,
what it takes and its check, its environment variable, its docs line, whether it is a schedule or trigger option).
These tests derive what each place that lists options must say from those declarations: ``configure``'s typed
``Options``, docs/options.md's table, the environment variables, the error messages. After adding or changing an
option, ``python tests/test_options.py --write`` (from the repository root) rewrites the generated parts."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

import autoprof
from autoprof import config

ROOT = Path(__file__).resolve().parent.parent
CONFIG_PY = ROOT / "autoprof" / "config.py"
OPTIONS_MD = ROOT / "docs" / "options.md"
TYPED_BEGIN = "    # generated from Config's declarations: do not edit by hand\n"
TYPED_END = "    # end of the generated lines\n"
TABLE_BEGIN = "<!-- the options table: generated from autoprof.config.Config by `python tests/test_options.py --write` -->\n"
TABLE_END = "<!-- end of the options table -->\n"


def typed_lines() -> str:
    """``Options``' body: each field's name and the type ``configure()`` takes for it."""
    return "".join(f"    {f.name}: {config.OPTIONS[f.name].takes or f.type}\n" for f in dataclasses.fields(config.Config))


def _shown(opt: config.Option, default: Any) -> str:
    if opt.shown is not None:
        return opt.shown
    if default is None:
        return "none"
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def _env(opt: config.Option) -> str:
    if opt.env is None:
        return "–"
    return f"`{opt.env}=true`" if opt.negated else f"`{opt.env}`"


def docs_table() -> str:
    """docs/options.md's table: one row per option, in field order."""
    defaults = config.Config()
    rows = ["| option | env var | default | accepts | meaning |\n", "|---|---|---|---|---|\n"]
    for key, opt in config.OPTIONS.items():
        cells = (f"`{key}`", _env(opt), _shown(opt, getattr(defaults, key)), opt.kind.accepts, opt.doc)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |\n")
    return "".join(rows)


def _between(text: str, begin: str, end: str) -> tuple[int, int]:
    start = text.index(begin) + len(begin)
    return start, text.index(end, start)


def _generated(path: Path, begin: str, end: str) -> str:
    text = path.read_text(encoding="utf-8")
    start, stop = _between(text, begin, end)
    return text[start:stop]


def write() -> None:
    """Rewrite the generated parts of config.py and docs/options.md from the declarations."""
    for path, begin, end, body in ((CONFIG_PY, TYPED_BEGIN, TYPED_END, typed_lines()), (OPTIONS_MD, TABLE_BEGIN, TABLE_END, docs_table())):
        text = path.read_text(encoding="utf-8")
        start, stop = _between(text, begin, end)
        path.write_text(text[:start] + body + text[stop:], encoding="utf-8")


def test_configures_typed_options_are_made_from_the_declarations() -> None:
    assert _generated(CONFIG_PY, TYPED_BEGIN, TYPED_END) == typed_lines(), "run: python tests/test_options.py --write"
    # and what the interpreter read is that text (no other line of Options, no field without one)
    assert list(config.Options.__annotations__) == [f.name for f in dataclasses.fields(config.Config)]


def test_the_docs_table_is_made_from_the_declarations() -> None:
    assert _generated(OPTIONS_MD, TABLE_BEGIN, TABLE_END) == docs_table(), "run: python tests/test_options.py --write"


def test_configures_docstring_names_every_option_and_what_it_accepts() -> None:
    doc = autoprof.configure.__doc__ or ""
    if sys.flags.optimize >= 2:
        pytest.skip("docstrings are stripped under python -OO")
    for key, opt in config.OPTIONS.items():
        assert f"``{key}``: {opt.kind.accepts}." in doc


@pytest.mark.parametrize("key", list(config.OPTIONS))
def test_a_value_of_the_wrong_kind_is_refused_with_what_the_declaration_accepts(key: str) -> None:
    before = config.SWITCH.config
    options: dict[str, Any] = {key: object()}
    with pytest.raises(config.ConfigError) as e:
        autoprof.configure(**options)
    assert str(e.value).startswith(f"{key} must be {config.OPTIONS[key].kind.accepts}, not <object object at ")
    assert config.SWITCH.config is before


@pytest.mark.parametrize("key", [key for key, opt in config.OPTIONS.items() if opt.env is not None])
def test_each_declared_environment_variable_sets_its_option_or_warns_and_keeps_the_default(key: str) -> None:
    opt = config.OPTIONS[key]
    assert opt.env is not None
    default = getattr(config.Config(), key)
    if opt.kind.parse is None:  # a boolean: "true" or "false", the variable switching it off when negated
        for text, value in (("true", True), ("FALSE", False)):
            assert getattr(config.from_env({opt.env: text}), key) is (value != opt.negated)
    else:
        given = {"AUTOPROF_FORMAT": " JSON ", "AUTOPROF_RANKS": "3,1"}
        text = given.get(opt.env) or ("/tmp/autoprof-x" if opt.kind is config.PATH else str(int(opt.kind.high or 0)))
        got = getattr(config.from_env({opt.env: text}), key)
        assert got != default and got == getattr(config.Config().replace(**{key: opt.kind.parse(text)}), key)
    config._warned.discard(opt.env)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cfg = config.from_env({opt.env: "\0bad"})
    assert getattr(cfg, key) == default
    assert len(caught) == 1 and str(caught[0].message).startswith(f"autoprof: {opt.env}=")


def test_the_derived_lists_are_the_declarations() -> None:
    """The names the rest of the package reads (the schedule's keys, the trigger's, the environment's) are each
    declaration's own: not a second list."""
    fields = {f.name: f.metadata["option"] for f in dataclasses.fields(config.Config)}
    assert fields == config.OPTIONS
    assert config.SCHEDULE_KEYS == ("wait", "warmup", "active", "repeat", "skip_first")  # @autoprof's order, in messages
    assert config.TRIGGER_KEYS[0] == "trigger" and all(k.startswith("trigger_") for k in config.TRIGGER_KEYS[1:])
    assert {name for name in (*config.ENV, *config._BOOL_ENV)} == {opt.env for opt in fields.values() if opt.env}
    assert config._BOOL_ENV["AUTOPROF_DISABLE"] == "enabled"


if __name__ == "__main__":  # pragma: no cover
    if sys.argv[1:] != ["--write"]:
        raise SystemExit("usage: python tests/test_options.py --write")
    write()
