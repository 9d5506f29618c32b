"""A command of ``autoprof`` is one registration (:data:`autoprof.cli.COMMANDS`): its name, help line, arguments and
handler. These tests add a command the way a new one is added, and read the parser the registry builds."""

from __future__ import annotations

import argparse
import gc
from typing import Any

import pytest

from autoprof import cli


def _hello_arguments(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--times", type=int, default=1)


def _register(monkeypatch: pytest.MonkeyPatch, handler: Any, **flags: Any) -> None:
    hello = cli.Command("hello", "say hello", _hello_arguments, handler, **flags)
    monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, hello))


def test_one_registration_adds_a_command_its_arguments_and_its_handler(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    seen: list[argparse.Namespace] = []
    _register(monkeypatch, lambda args: seen.append(args) or 7)
    assert cli.main(["hello", "--times", "3"]) == 7
    assert seen[0].command == "hello" and seen[0].times == 3
    capsys.readouterr()
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "{analyze,diff,report,show,run,hello}" in out and "say hello" in out


def test_the_top_level_help_lists_the_registered_commands_in_order(capsys: Any) -> None:
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "{" + ",".join(c.name for c in cli.COMMANDS) + "}" in out
    for command in cli.COMMANDS:
        assert command.help.split(" (")[0][:40] in " ".join(out.split())


def test_only_the_commands_that_read_traces_take_the_analysis_options(capsys: Any) -> None:
    for command in cli.COMMANDS:
        assert cli.main([command.name, "--help"]) == 0
        assert ("--scheduler-timeout" in capsys.readouterr().out) is command.analysis, command.name


def test_a_batch_command_runs_with_the_collector_off_and_a_ctrl_c_is_exit_130(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    states: list[bool] = []

    def interrupted(args: argparse.Namespace) -> int:
        states.append(gc.isenabled())
        raise KeyboardInterrupt

    _register(monkeypatch, interrupted)
    assert gc.isenabled()
    assert cli.main(["hello"]) == 130
    assert states == [False] and gc.isenabled()
    assert capsys.readouterr().err == "autoprof: interrupted\n"


def test_a_command_that_is_no_batch_lets_its_handlers_exceptions_through(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(args: argparse.Namespace) -> int:
        assert gc.isenabled()
        raise KeyboardInterrupt

    _register(monkeypatch, interrupted, batch=False)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["hello"])


def test_an_unknown_argument_is_reported_with_the_commands_own_usage_when_it_has_one(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    _register(monkeypatch, lambda args: 0, usage="autoprof hello [--times N]")
    assert cli.main(["hello", "--bogus"]) == 2
    assert capsys.readouterr().err.startswith("usage: autoprof hello [--times N]\nautoprof hello: error: unrecognized arguments: --bogus")
    assert cli.main(["analyze", "x", "--bogus"]) == 2
    assert capsys.readouterr().err.startswith("usage: autoprof [-h] [--version] {")


def test_no_command_or_an_unknown_one_is_usage_and_exit_2(capsys: Any) -> None:
    assert cli.main([]) == 2
    assert capsys.readouterr().err.startswith("usage: autoprof")
    assert cli.main(["nope"]) == 2
