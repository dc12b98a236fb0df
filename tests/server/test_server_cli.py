"""The `kraftd` command line (argument parsing; running is covered by test_server_process)."""
from __future__ import annotations

import pytest

from kraftd import cli
from kraftd.commands import serve


def test_serve_flags_map_to_settings_fields():
    args = cli.build_parser().parse_args([
        "serve", "--config", "k.toml", "--node-id", "3", "--listen", "127.0.0.1:0",
        "--advertised-listener", "h:1", "--data-dir", "/d", "--metrics-listen", "127.0.0.1:0",
        "--log-format", "json", "--log-level", "debug", "--fsync-policy", "never",
        "--voters", "1@a:1,3@b:2"])
    assert args.config == "k.toml" and args.run is serve.run
    assert {f: getattr(args, f) for f, _ in serve.FLAGS.values()} == {
        "node_id": 3, "listen": "127.0.0.1:0", "advertised_listener": "h:1", "data_dir": "/d",
        "metrics_listen": "127.0.0.1:0", "log_format": "json", "log_level": "debug",
        "fsync_policy": "never", "voters": "1@a:1,3@b:2", "cluster_secret_file": None}


def test_flags_not_given_are_none_so_env_and_file_apply():
    args = cli.build_parser().parse_args(["serve"])
    assert all(getattr(args, f) is None for f, _ in serve.FLAGS.values())


def test_invalid_flag_value_exits_2_naming_the_field(capsys):
    assert cli.main(["serve", "--metrics-listen", "nowhere"]) == 2
    assert "metrics_listen" in capsys.readouterr().err


def test_a_subcommand_is_required(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main([])
    assert e.value.code == 2
