"""kraftd settings: TOML file + KRAFTD_* environment + CLI flags (flags > env > file > defaults).

`Settings.load(config_file, **flags)` is the one entry point; a bad value raises
`ConfigError` whose message names the field, so a misconfigured daemon fails at start.
"""
from __future__ import annotations

import contextvars
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings import TomlConfigSettingsSource

from ..protocol.sasl_client import MECHANISMS as SASL_MECHANISMS
from ..quorum.metadata.acls import parse_principal

MIB = 1024 * 1024
GIB = 1024 * MIB
DAY_MS = 24 * 3600 * 1000

# Settings the asyncio shell consumes itself; everything else is handed to the core.
SHELL_ONLY = frozenset({
    "listen", "metrics_listen", "log_format", "log_level",
    "socket_request_max_bytes", "connections_max_idle_ms", "fsync_inline_max_bytes", "fsync_aio",
    "cluster_secret", "cluster_secret_file", "max_connections", "max_connections_per_ip",
    "security_protocol", "tls_cert_file", "tls_key_file", "tls_ca_file", "tls_client_auth", "sasl_mechanisms",
})

# The TOML path is per load() call; pydantic-settings builds sources from the class, so the
# path travels in a context variable rather than class state.
_toml_path: contextvars.ContextVar[Path | None] = contextvars.ContextVar("kraftd_toml", default=None)


class ConfigError(ValueError):
    """Invalid configuration; str() lists every offending field."""


def parse_host_port(value: str, *, allow_port_zero: bool = True) -> tuple[str, int]:
    """'host:port' or '[v6addr]:port' -> (host, port). Raises ValueError with a readable reason."""
    if not isinstance(value, str) or ":" not in value:
        raise ValueError(f"expected HOST:PORT, got {value!r}")
    host, _, port_s = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"IPv6 addresses must be bracketed ([::1]:9092), got {value!r}")
    if not host:
        raise ValueError(f"missing host in {value!r}")
    if not port_s.isdigit():
        raise ValueError(f"port must be a number in {value!r}")
    port = int(port_s)
    lowest = 0 if allow_port_zero else 1
    if not lowest <= port <= 65535:
        raise ValueError(f"port must be {lowest}..65535, got {port}")
    return host, port


def parse_voters(spec: str) -> dict[int, tuple[str, int]]:
    """'1@host:9092,2@[::1]:9093' -> {1: ('host', 9092), 2: ('::1', 9093)} (controller.quorum.voters)."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in (e.strip() for e in spec.split(",")):
        node, sep, address = entry.partition("@")
        if not sep or not node.strip().isdigit():
            raise ValueError(f"expected ID@HOST:PORT, got {entry!r}")
        node_id = int(node)
        if node_id in voters:
            raise ValueError(f"voter {node_id} is listed twice")
        voters[node_id] = parse_host_port(address.strip(), allow_port_zero=False)
    if not voters:
        raise ValueError("no voters given")
    return voters


def format_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="KRAFTD_", extra="forbid", validate_default=True)

    node_id: int = Field(1, ge=0)
    listen: str = "127.0.0.1:9092"
    advertised_listener: str | None = None  # None: same as listen
    data_dir: str = "./data"
    metrics_listen: str = "127.0.0.1:9464"
    log_format: Literal["console", "json"] = "console"
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    auto_create_topics: bool = True
    default_partitions: int = Field(1, gt=0)
    # Auto-creation (Metadata, Produce) takes a token from a bucket of auto_create_topics_burst
    # refilled at auto_create_topics_rate per second, and stops once the cluster holds
    # auto_create_topics_max topics; a refused one is UNKNOWN_TOPIC_OR_PARTITION (retriable).
    auto_create_topics_rate: float = Field(10.0, gt=0)
    auto_create_topics_burst: int = Field(100, gt=0)
    auto_create_topics_max: int = Field(1_000, gt=0)
    # Partitions the cluster may hold: CreateTopics past it is POLICY_VIOLATION.
    max_partitions: int = Field(10_000, gt=0)
    # Kafka's producer.id.expiration.ms: an idempotent producer's state (epoch, last sequences)
    # is forgotten after this long without a batch, checked every ..._check_interval_ms.
    producer_id_expiration_ms: int = Field(DAY_MS, gt=0)
    producer_id_expiration_check_interval_ms: int = Field(600_000, gt=0)
    segment_bytes: int = Field(GIB, gt=0)
    index_interval_bytes: int = Field(4096, gt=0)
    retention_ms: int = Field(7 * DAY_MS, ge=-1)  # -1: keep forever
    retention_bytes: int = Field(-1, ge=-1)  # -1: no size limit
    retention_check_interval_ms: int = Field(300_000, gt=0)
    # The log cleaner of cleanup.policy=compact topics (Kafka's log.cleaner.*): checks for a log
    # to clean every backoff; reads and writes at most io_max_bytes_per_second (inf: no limit);
    # maps at most dedupe_max_keys keys a pass (a larger dirty part takes more passes).
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = Field(15_000, gt=0)
    log_cleaner_io_max_bytes_per_second: float = Field(float("inf"), gt=0)
    log_cleaner_dedupe_max_keys: int = Field(1_000_000, gt=0)
    message_max_bytes: int = Field(1_048_588, gt=0)
    socket_request_max_bytes: int = Field(104_857_600, gt=0)
    connections_max_idle_ms: int = Field(600_000, gt=0)
    # Kafka's max.connections and max.connections.per.ip (unbounded there): a connection over
    # either is closed as soon as it is accepted. Loopback counts as one address like any other.
    max_connections: int = Field(10_000, gt=0)
    max_connections_per_ip: int = Field(1_000, gt=0)
    # A parked acks=-1 Produce, CreateTopics or DeleteTopics waits at most this long, whatever
    # the timeout_ms it carries (REQUEST_TIMED_OUT then, as at its own timeout).
    request_timeout_cap_ms: int = Field(60_000, gt=0)

    # acks_all: an acks=-1 produce is answered only after its data is fsynced; other appends are
    #   fsynced by the background group-commit loop every flush_interval_ms.
    # always: every produce waits for fsync.
    # never: no fsync, the OS decides (tests and benchmarks only: a crash loses acked data).
    fsync_policy: Literal["acks_all", "always", "never"] = "acks_all"
    flush_interval_ms: int = Field(100, gt=0)
    # Segment fsyncs go to the kernel through Linux native AIO (io_submit, an eventfd tells the
    # event loop): no thread, no GIL hand-off, no loop blocked on the disk (bench/README.md,
    # (g)). Directory fsyncs and epoch checkpoints stay in the fsync pool. Where AIO does not
    # work (checked at start with a real fsync in data_dir), or with false, the two below apply.
    fsync_aio: bool = True
    # Without AIO: a group commit of at most 2 logs with at most this many bytes appended (and
    # no new segment or epoch checkpoint) is fsynced on the event loop, not in the fsync pool:
    # the pool's thread and GIL hand-offs cost more than such an fsync. 0: always the pool.
    fsync_inline_max_bytes: int = Field(64 * 1024, ge=0)

    replica_fetch_response_max_bytes: int = Field(10 * MIB, gt=0)
    fetch_max_wait_cap_ms: int = Field(30_000, ge=0)
    max_incremental_fetch_session_cache_slots: int = Field(1000, ge=0)
    min_incremental_fetch_session_eviction_ms: int = Field(120_000, ge=0)
    # A client's full fetch naming more partitions (unknown ones included) opens no session: it
    # is answered in full with session id 0; an incremental fetch growing a session past it ends
    # the session (FETCH_SESSION_ID_NOT_FOUND, the client falls back to full fetches). Sessions
    # of authenticated nodes (followers) are not capped.
    max_incremental_fetch_session_partitions: int = Field(1_000, gt=0)
    snapshot_min_changed_records_ratio: float = Field(0.5, gt=0, le=1)
    snapshot_max_bytes_between: int = Field(20 * MIB, gt=0)
    snapshot_start_offset_lag_time_max_ms: int = Field(7 * DAY_MS, gt=0)

    # The Kafka listener's security protocol (Kafka's names): PLAINTEXT; SSL (TLS with the PEM
    # certificate chain and key below); SASL_PLAINTEXT or SASL_SSL (clients authenticate with
    # one of sasl_mechanisms against the users' credentials in the metadata log, so these need
    # voters). tls_ca_file is what peers' certificates (and, with tls_client_auth
    # requested/required, clients' certificates) are verified against; a client that shows a
    # certificate is `User:<its subject>` (RFC 2253), as on Kafka.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    # Comma-separated, of SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (Kafka's sasl.enabled.mechanisms).
    sasl_mechanisms: str = "SCRAM-SHA-256,SCRAM-SHA-512"
    # "name:password": at first start the controller gives this user SCRAM-SHA-256 and -512
    # credentials if it has none (Redpanda's RP_BOOTSTRAP_USER); how the first admin logs in.
    bootstrap_user: SecretStr | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    tls_ca_file: str | None = None
    tls_client_auth: Literal["none", "requested", "required"] = "none"
    # Kafka's authorizer.class.name: "acl" decides every request with the ACLs in the metadata
    # log (CreateAcls and friends; so it needs voters), "none" allows everything. super_users
    # ("User:a;User:b", Kafka's super.users) bypass the ACLs; a resource no ACL covers is refused
    # unless allow_everyone_if_no_acl_found. The cluster's nodes may always do everything.
    authorizer: Literal["none", "acl"] = "none"
    super_users: str = ""
    allow_everyone_if_no_acl_found: bool = False

    # Cluster membership: "1@host:port,2@host:port,..." (Kafka's controller.quorum.voters).
    # Unset: a one-node cluster. The addresses are where *this* node reaches each voter.
    voters: str | None = None
    # What nodes prove to each other (SCRAM-SHA-512 as User:kraftd-node-<id>, credentials derived
    # from it): required once --voters names another node. The same value on every node; a
    # file's contents are stripped of surrounding whitespace.
    cluster_secret: SecretStr | None = None
    cluster_secret_file: str | None = None
    # No longer needed, and does nothing but log a warning: directory ids (meta.properties) tell a
    # replaced disk from the voter it replaced (README, "Replacing a lost disk").
    rejoin: bool = False
    replica_lag_time_max_ms: int = Field(30_000, gt=0)
    # What a leader sends the replicas a partition move adds, bytes/s over all of them (Kafka's
    # leader.replication.throttled.rate for the moving replicas); 0: unthrottled.
    reassignment_throttle_bytes_per_s: int = Field(0, ge=0)
    # Raft timing of every group (the metadata quorum's and each partition's): Kafka's
    # controller.quorum.{election.timeout,fetch.timeout,election.backoff.max,request.timeout,retry.backoff}.ms.
    quorum_election_timeout_ms: int = Field(1000, gt=0)
    quorum_fetch_timeout_ms: int = Field(2000, gt=0)
    quorum_election_backoff_max_ms: int = Field(1000, gt=0)
    quorum_request_timeout_ms: int = Field(2000, gt=0)
    quorum_retry_backoff_ms: int = Field(100, gt=0)
    default_replication_factor: int | None = Field(None, gt=0)  # None: min(3, live brokers)
    # The metadata leader fences a broker it has not heard from for this long.
    broker_session_timeout_ms: int = Field(9_000, gt=0)

    # Consumer groups (Kafka's names): __consumer_offsets partitions (fixed once created), the
    # delayed first rebalance, allowed session timeouts, and how long an empty group's offsets
    # are kept.
    offsets_topic_num_partitions: int = Field(50, gt=0)
    group_initial_rebalance_delay_ms: int = Field(3000, ge=0)
    group_min_session_timeout_ms: int = Field(6000, gt=0)
    group_max_session_timeout_ms: int = Field(1_800_000, gt=0)
    offsets_retention_minutes: int = Field(7 * 24 * 60, gt=0)
    offsets_retention_check_interval_ms: int = Field(600_000, gt=0)
    # Groups one coordinator holds (a new one past it is GROUP_MAX_SIZE_REACHED) and Kafka's
    # group.max.size (members, KIP-394 pending ones included; unbounded on Kafka).
    max_groups: int = Field(10_000, gt=0)
    group_max_size: int = Field(1_000, gt=0)

    @field_validator("listen", "metrics_listen")
    @classmethod
    def _bindable(cls, v: str) -> str:
        parse_host_port(v, allow_port_zero=True)  # port 0 = ephemeral (tests)
        return v

    @field_validator("voters")
    @classmethod
    def _voters(cls, v: str | None) -> str | None:
        if v is not None:
            parse_voters(v)
        return v

    @field_validator("advertised_listener")
    @classmethod
    def _connectable(cls, v: str | None) -> str | None:
        if v is not None:
            parse_host_port(v, allow_port_zero=False)
        return v

    @model_validator(mode="after")
    def _secret_for_a_cluster(self) -> "Settings":
        if self.cluster_secret is not None and self.cluster_secret_file is not None:
            raise ValueError("set cluster_secret or cluster_secret_file, not both")
        if self.cluster_secret_file is not None:
            try:
                secret = Path(self.cluster_secret_file).read_text().strip()
            except OSError as e:
                raise ValueError(f"cluster_secret_file {self.cluster_secret_file}: {e.strerror or e}") from None
            if not secret:
                raise ValueError(f"cluster_secret_file {self.cluster_secret_file} is empty")
            self.cluster_secret, self.cluster_secret_file = SecretStr(secret), None
        if self.cluster_secret is not None and not self.cluster_secret.get_secret_value():
            raise ValueError("cluster_secret is empty")
        if self.voters and self.cluster_secret is None and set(parse_voters(self.voters)) != {self.node_id}:
            raise ValueError("a cluster (voters names other nodes) needs cluster_secret (env KRAFTD_CLUSTER_SECRET) "
                             "or cluster_secret_file: nodes prove who they are with it, so that no client can act "
                             "as a node")
        return self

    @field_validator("security_protocol", mode="before")
    @classmethod
    def _protocol_name(cls, v):
        return v.upper() if isinstance(v, str) else v

    @field_validator("tls_client_auth", mode="before")
    @classmethod
    def _client_auth_name(cls, v):
        return v.lower() if isinstance(v, str) else v

    @field_validator("sasl_mechanisms")
    @classmethod
    def _mechanisms(cls, v: str) -> str:
        names = [n.strip().upper() for n in v.split(",") if n.strip()]
        unknown = [n for n in names if n not in SASL_MECHANISMS]
        if unknown or not names:
            raise ValueError(f"expected a comma-separated list of {', '.join(SASL_MECHANISMS)}, got {v!r}")
        return ",".join(dict.fromkeys(names))

    @property
    def sasl_mechanism_list(self) -> list[str]:
        return self.sasl_mechanisms.split(",")

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @model_validator(mode="after")
    def _sasl_needs_a_metadata_log(self) -> "Settings":
        if self.uses_sasl and not self.voters:
            raise ValueError(f"security_protocol {self.security_protocol} needs voters: users' credentials live in "
                             "the metadata log (a one-node cluster: voters = \"1@host:port\")")
        if self.bootstrap_user is not None:
            name, colon, password = self.bootstrap_user.get_secret_value().partition(":")
            if not name or not colon or not password:
                raise ValueError("bootstrap_user must be name:password")
        return self

    @field_validator("super_users")
    @classmethod
    def _super_users(cls, v: str) -> str:
        principals = [p.strip() for p in v.split(";") if p.strip()]
        bad = [p for p in principals if parse_principal(p) is None]
        if bad:
            raise ValueError(f"expected principals as Type:name separated by ';' (User:alice;User:bob), got {bad}")
        return ";".join(principals)

    @model_validator(mode="after")
    def _acls_need_a_metadata_log(self) -> "Settings":
        if self.authorizer == "acl" and not self.voters:
            raise ValueError("authorizer acl needs voters: ACLs live in the metadata log (a one-node cluster: "
                             "voters = \"1@host:port\")")
        return self

    @model_validator(mode="after")
    def _tls_files(self) -> "Settings":
        if self.uses_tls:
            missing = [n for n in ("tls_cert_file", "tls_key_file") if getattr(self, n) is None]
            if missing:
                raise ValueError(f"security_protocol {self.security_protocol} needs {' and '.join(missing)} (PEM files)")
        if self.tls_client_auth != "none" and self.tls_ca_file is None:
            raise ValueError(f"tls_client_auth {self.tls_client_auth} needs tls_ca_file: client certificates "
                             "are verified against it")
        for name in ("tls_cert_file", "tls_key_file", "tls_ca_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{name} {path}: no such file")
        return self

    @model_validator(mode="after")
    def _distinct_ports(self) -> "Settings":
        lh, lp = parse_host_port(self.listen)
        mh, mp = parse_host_port(self.metrics_listen)
        if lp != 0 and lp == mp and (lh == mh or "0.0.0.0" in (lh, mh) or "::" in (lh, mh)):
            raise ValueError("listen and metrics_listen must not use the same port")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        path = _toml_path.get()
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @classmethod
    def load(cls, config_file: str | Path | None = None, **flags: Any) -> "Settings":
        """Build settings; flags whose value is None are treated as not given."""
        path = Path(config_file) if config_file is not None else None
        if path is not None:
            if not path.is_file():
                raise ConfigError(f"config file not found: {path}")
            try:
                with path.open("rb") as f:
                    tomllib.load(f)  # syntax errors get a clear message here
            except tomllib.TOMLDecodeError as e:
                raise ConfigError(f"config file {path}: {e}") from None
        given = {k: v for k, v in flags.items() if v is not None}
        token = _toml_path.set(path)
        try:
            return cls(**given)
        except ValidationError as e:
            raise ConfigError(describe_validation_error(e, path)) from None
        finally:
            _toml_path.reset(token)

    # -- derived values --------------------------------------------------------------------
    @property
    def listen_address(self) -> tuple[str, int]:
        return parse_host_port(self.listen)

    @property
    def metrics_address(self) -> tuple[str, int]:
        return parse_host_port(self.metrics_listen)

    def advertised_address(self, bound_port: int | None = None) -> tuple[str, int]:
        """Where clients should connect; with `--listen host:0` pass the port actually bound."""
        if self.advertised_listener is not None:
            return parse_host_port(self.advertised_listener)
        host, port = self.listen_address
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"  # a wildcard is not connectable; set advertised_listener instead
        return host, bound_port if (port == 0 and bound_port) else port

    def to_node_config(self, bound_port: int | None = None) -> dict[str, Any]:
        """Keyword arguments for quorum's NodeConfig (field names identical to Settings).

        Shell-only fields are left out; advertised_listener is resolved into
        advertised_host/advertised_port (NodeConfig's names).
        """
        values = {k: v for k, v in self.model_dump().items() if k not in SHELL_ONLY}
        values.pop("advertised_listener")
        if self.bootstrap_user is not None:
            values["bootstrap_user"] = self.bootstrap_user.get_secret_value()
        values["advertised_host"], values["advertised_port"] = self.advertised_address(bound_port)
        return values


def describe_validation_error(e: ValidationError, path: Path | None = None) -> str:
    lines = []
    for err in e.errors():
        field = ".".join(str(p) for p in err["loc"]) or "settings"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown setting" + (f" in {path}" if path else "")
        lines.append(f"{field}: {msg}")
    return "invalid configuration: " + "; ".join(lines)
