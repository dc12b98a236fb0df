"""Settings: sources and their precedence, validation messages, the NodeConfig hand-off."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kraftd.config.settings import ConfigError, Settings, parse_host_port
from kraftd.quorum.node_config import NodeConfig
from kraftd.quorum.raft.config import RaftConfig
from kraftd.server.node_files import node_config_from_settings, raft_config_from_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "example.toml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for name in list(os.environ):
        if name.startswith("KRAFTD_"):
            monkeypatch.delenv(name)


def toml(tmp_path, text: str) -> Path:
    path = tmp_path / "kraftd.toml"
    path.write_text(text)
    return path


def test_defaults():
    s = Settings.load()
    assert (s.node_id, s.listen, s.advertised_listener, s.data_dir) == (1, "127.0.0.1:9092", None, "./data")
    assert s.metrics_listen == "127.0.0.1:9464" and s.log_format == "console" and s.log_level == "info"
    assert s.segment_bytes == 1 << 30 and s.retention_ms == 7 * 24 * 3600 * 1000
    assert s.fsync_policy == "acks_all" and s.flush_interval_ms == 100
    assert s.message_max_bytes == 1048588 and s.socket_request_max_bytes == 104857600
    assert s.replica_fetch_response_max_bytes == 10 << 20 and s.snapshot_max_bytes_between == 20 << 20


def test_example_file_documents_the_defaults():
    assert Settings.load(EXAMPLE) == Settings.load()


def test_precedence_flags_over_env_over_file(tmp_path, monkeypatch):
    path = toml(tmp_path, 'node_id = 5\ndata_dir = "/from/file"\nlog_level = "debug"\nretention_ms = -1\n')
    s = Settings.load(path)
    assert (s.node_id, s.data_dir, s.log_level, s.retention_ms) == (5, "/from/file", "debug", -1)
    monkeypatch.setenv("KRAFTD_NODE_ID", "6")
    monkeypatch.setenv("KRAFTD_DATA_DIR", "/from/env")
    s = Settings.load(path)
    assert (s.node_id, s.data_dir, s.log_level) == (6, "/from/env", "debug")
    s = Settings.load(path, node_id=7, data_dir=None)  # None = flag not given
    assert (s.node_id, s.data_dir, s.log_level) == (7, "/from/env", "debug")


def test_env_values_are_parsed(monkeypatch):
    monkeypatch.setenv("KRAFTD_AUTO_CREATE_TOPICS", "false")
    monkeypatch.setenv("KRAFTD_SNAPSHOT_MIN_CHANGED_RECORDS_RATIO", "0.25")
    s = Settings.load()
    assert s.auto_create_topics is False and s.snapshot_min_changed_records_ratio == 0.25


@pytest.mark.parametrize("field, value, phrase", [
    ("listen", "localhost", "HOST:PORT"),
    ("listen", "localhost:99999", "65535"),
    ("listen", ":9092", "missing host"),
    ("listen", "::1:9092", "bracketed"),
    ("metrics_listen", "127.0.0.1:http", "number"),
    ("advertised_listener", "example.com:0", "1..65535"),
    ("segment_bytes", 0, "greater than 0"),
    ("message_max_bytes", -1, "greater than 0"),
    ("retention_ms", -2, "greater than or equal to -1"),
    ("default_partitions", 0, "greater than 0"),
    ("log_format", "xml", "'console' or 'json'"),
    ("log_level", "loud", "debug"),
    ("fsync_policy", "sometimes", "acks_all"),
    ("snapshot_min_changed_records_ratio", 1.5, "less than or equal to 1"),
    ("node_id", "one", "integer"),
])
def test_validation_error_names_the_field(field, value, phrase):
    with pytest.raises(ConfigError) as e:
        Settings.load(**{field: value})
    assert str(e.value).startswith(f"invalid configuration: {field}: ")
    assert phrase in str(e.value)


def test_bad_value_in_file_and_env_name_the_field(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="flush_interval_ms"):
        Settings.load(toml(tmp_path, "flush_interval_ms = 0\n"))
    monkeypatch.setenv("KRAFTD_SEGMENT_BYTES", "lots")
    with pytest.raises(ConfigError, match="segment_bytes"):
        Settings.load()


def test_unknown_key_in_file_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match=r"segment_byte: unknown setting"):
        Settings.load(toml(tmp_path, "segment_byte = 10\n"))


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        Settings.load(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="kraftd.toml"):
        Settings.load(toml(tmp_path, "node_id = \n"))


def test_listen_and_metrics_on_same_port_rejected():
    with pytest.raises(ConfigError, match="same port"):
        Settings.load(listen="127.0.0.1:9000", metrics_listen="0.0.0.0:9000")
    Settings.load(listen="127.0.0.1:0", metrics_listen="127.0.0.1:0")  # both ephemeral: fine


def test_host_port_parsing():
    assert parse_host_port("[::1]:9092") == ("::1", 9092)
    assert parse_host_port("kafka.example.com:1") == ("kafka.example.com", 1)


def test_node_config_gets_every_core_field_by_the_same_name():
    values = Settings.load(node_id=3, segment_bytes=4096, fsync_policy="never").to_node_config()
    core_fields = {f.name for f in dataclasses.fields(NodeConfig)} - {"extra"}
    raft_fields = {f"quorum_{name}" for name in ("election_timeout_ms", "fetch_timeout_ms", "election_backoff_max_ms",
                                                 "request_timeout_ms", "retry_backoff_ms")}
    assert set(values) == core_fields | raft_fields  # nothing missing, no shell-only settings leak in
    config = node_config_from_settings(values)
    assert (config.node_id, config.segment_bytes, config.fsync_policy) == (3, 4096, "never")


def test_raft_timing_comes_from_the_quorum_settings():
    values = Settings.load(quorum_election_timeout_ms=300, quorum_fetch_timeout_ms=900).to_node_config()
    raft = raft_config_from_settings(values)
    assert (raft.election_timeout_ms, raft.fetch_timeout_ms, raft.request_timeout_ms) == (300, 900, 2000)
    assert raft.check_quorum_ms == 1350
    assert raft_config_from_settings(Settings.load().to_node_config()) == RaftConfig()


def test_advertised_address_resolution():
    assert Settings.load().to_node_config()["advertised_port"] == 9092
    s = Settings.load(listen="127.0.0.1:0")
    values = s.to_node_config(bound_port=40001)
    assert (values["advertised_host"], values["advertised_port"]) == ("127.0.0.1", 40001)
    s = Settings.load(listen="0.0.0.0:9092", advertised_listener="kafka.example.com:19092")
    values = s.to_node_config(bound_port=9092)
    assert (values["advertised_host"], values["advertised_port"]) == ("kafka.example.com", 19092)


def test_a_cluster_needs_a_secret_and_a_lone_node_does_not(tmp_path):
    voters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"
    with pytest.raises(ConfigError, match="cluster_secret .*KRAFTD_CLUSTER_SECRET"):
        Settings.load(voters=voters)
    assert Settings.load().cluster_secret is None                       # make serve: no --voters
    assert Settings.load(voters="1@127.0.0.1:1").cluster_secret is None  # a cluster of itself
    with pytest.raises(ConfigError, match="cluster_secret"):
        Settings.load(voters="2@127.0.0.1:2")                            # a broker of another's quorum
    s = Settings.load(voters=voters, cluster_secret="s3cret")
    assert s.cluster_secret.get_secret_value() == "s3cret" and "s3cret" not in repr(s)
    assert "cluster_secret" not in s.to_node_config()                   # the shell's, not the core's


def test_the_secret_from_a_file(tmp_path, monkeypatch):
    path = tmp_path / "secret"
    path.write_text("  from-a-file\n")
    s = Settings.load(voters="1@a:1,2@b:2", cluster_secret_file=str(path))
    assert s.cluster_secret.get_secret_value() == "from-a-file"
    path.write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        Settings.load(voters="1@a:1,2@b:2", cluster_secret_file=str(path))
    with pytest.raises(ConfigError, match="not both"):
        Settings.load(cluster_secret="x", cluster_secret_file=str(path))
    with pytest.raises(ConfigError, match="No such file"):
        Settings.load(cluster_secret_file=str(tmp_path / "missing"))
    monkeypatch.setenv("KRAFTD_CLUSTER_SECRET", "from-env")
    assert Settings.load(voters="1@a:1,2@b:2").cluster_secret.get_secret_value() == "from-env"


def test_the_file_backed_node_runs_with_the_quorum_settings(tmp_path):
    from kraftd.server.node_files import open_file_node

    values = Settings.load(data_dir=str(tmp_path), quorum_election_timeout_ms=300,
                           quorum_retry_backoff_ms=50).to_node_config()
    node = open_file_node(values, 1_000)
    try:
        assert node.replication.config.election_timeout_ms == 300
        assert node.replication.config.retry_backoff_ms == 50
    finally:
        node.close()


def test_tls_settings_are_checked_when_loaded(tmp_path, monkeypatch):
    cert, key, ca = (tmp_path / n for n in ("c.pem", "k.pem", "ca.pem"))
    for f in (cert, key, ca):
        f.write_text("-")
    assert Settings.load().security_protocol == "PLAINTEXT"
    monkeypatch.setenv("KRAFTD_SECURITY_PROTOCOL", "ssl")  # Kafka's names, any case
    with pytest.raises(ConfigError, match="SSL needs tls_cert_file and tls_key_file"):
        Settings.load()
    monkeypatch.setenv("KRAFTD_TLS_CERT_FILE", str(cert))
    monkeypatch.setenv("KRAFTD_TLS_KEY_FILE", str(tmp_path / "missing.key"))
    with pytest.raises(ConfigError, match="tls_key_file .*missing.key: no such file"):
        Settings.load()
    monkeypatch.setenv("KRAFTD_TLS_KEY_FILE", str(key))
    monkeypatch.setenv("KRAFTD_TLS_CLIENT_AUTH", "Required")
    with pytest.raises(ConfigError, match="tls_client_auth required needs tls_ca_file"):
        Settings.load()
    monkeypatch.setenv("KRAFTD_TLS_CA_FILE", str(ca))
    s = Settings.load()
    assert (s.security_protocol, s.tls_client_auth) == ("SSL", "required")
    monkeypatch.setenv("KRAFTD_SECURITY_PROTOCOL", "SASL_SSL")  # users live in the metadata log
    with pytest.raises(ConfigError, match="SASL_SSL needs voters"):
        Settings.load()
    monkeypatch.setenv("KRAFTD_VOTERS", "1@127.0.0.1:9092")
    monkeypatch.setenv("KRAFTD_SASL_MECHANISMS", "scram-sha-512, PLAIN,PLAIN")
    monkeypatch.setenv("KRAFTD_BOOTSTRAP_USER", "admin:pa:ss")
    s = Settings.load()
    assert (s.uses_tls, s.uses_sasl, s.sasl_mechanism_list) == (True, True, ["SCRAM-SHA-512", "PLAIN"])
    assert s.to_node_config(bound_port=1)["bootstrap_user"] == "admin:pa:ss"  # the password may hold ':'
    assert "pa:ss" not in repr(s)
    for name, value, message in [("KRAFTD_SASL_MECHANISMS", "GSSAPI", "comma-separated list"),
                                 ("KRAFTD_BOOTSTRAP_USER", "admin", "name:password")]:
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=message):
            Settings.load()
        monkeypatch.delenv(name)
    # The shell's own: never handed to the core.
    assert not {"security_protocol", "tls_cert_file"} & set(s.to_node_config(bound_port=1))
