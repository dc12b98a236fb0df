"""Registry of the APIs we have codecs for, built from the request/response schemas that exist.

Adding `FooRequest.json` and `FooResponse.json` with an `apiKey` to `schemas/` adds the API to
`KNOWN_API_BY_KEY` (framing encodes and decodes it) and, unless it is in `NOT_ADVERTISED`, to
`API_BY_KEY`: the APIs we serve and list in ApiVersions.
"""
from __future__ import annotations

from typing import NamedTuple

from .messages import ALL_MESSAGES

__all__ = [
    "ApiSpec", "API_BY_KEY", "API_BY_NAME", "KNOWN_API_BY_KEY", "NOT_ADVERTISED",
    "header_versions", "supported_versions",
    "PRODUCE", "FETCH", "LIST_OFFSETS", "METADATA", "API_VERSIONS", "CREATE_TOPICS",
    "DELETE_TOPICS", "DELETE_RECORDS", "INIT_PRODUCER_ID", "OFFSET_FOR_LEADER_EPOCH",
    "FETCH_SNAPSHOT", "VOTE", "BEGIN_QUORUM_EPOCH", "END_QUORUM_EPOCH", "DESCRIBE_QUORUM",
    "ALTER_PARTITION", "BROKER_REGISTRATION", "ALLOCATE_PRODUCER_IDS", "GROUP_APIS",
    "OFFSET_COMMIT", "OFFSET_FETCH", "FIND_COORDINATOR", "JOIN_GROUP", "HEARTBEAT", "LEAVE_GROUP",
    "SYNC_GROUP", "DESCRIBE_GROUPS", "LIST_GROUPS", "DELETE_GROUPS", "OFFSET_DELETE",
    "DESCRIBE_USER_SCRAM_CREDENTIALS", "ALTER_USER_SCRAM_CREDENTIALS", "DESCRIBE_ACLS", "CREATE_ACLS",
    "DELETE_ACLS", "DESCRIBE_CONFIGS", "INCREMENTAL_ALTER_CONFIGS", "ADD_RAFT_VOTER", "REMOVE_RAFT_VOTER", "UPDATE_RAFT_VOTER",
    "ALTER_PARTITION_REASSIGNMENTS", "LIST_PARTITION_REASSIGNMENTS",
]

PRODUCE = 0
FETCH = 1
FIND_COORDINATOR = 10
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
API_VERSIONS = 18
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
INIT_PRODUCER_ID = 22
OFFSET_FOR_LEADER_EPOCH = 23
VOTE = 52
BEGIN_QUORUM_EPOCH = 53
END_QUORUM_EPOCH = 54
DESCRIBE_QUORUM = 55
ALTER_PARTITION = 56
FETCH_SNAPSHOT = 59
BROKER_REGISTRATION = 62
DELETE_GROUPS = 42
OFFSET_DELETE = 47
ALLOCATE_PRODUCER_IDS = 67
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51
DESCRIBE_ACLS = 29
CREATE_ACLS = 30
DELETE_ACLS = 31
DESCRIBE_CONFIGS = 32
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45  # KIP-455
LIST_PARTITION_REASSIGNMENTS = 46
ADD_RAFT_VOTER = 80      # KIP-853
REMOVE_RAFT_VOTER = 81
UPDATE_RAFT_VOTER = 82   # a voter tells the leader its listener

# The classic consumer-group protocol, served by the group coordinator (quorum/groups/).
GROUP_APIS = frozenset({OFFSET_COMMIT, OFFSET_FETCH, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP,
                        DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS, OFFSET_DELETE})

# Broker-to-controller APIs whose codecs exist but that no handler serves yet: framing encodes
# and decodes them, ApiVersions does not list them, so no client is told to send them. Take a
# key out when its handler lands.
NOT_ADVERTISED = frozenset({ALTER_PARTITION, BROKER_REGISTRATION, ALLOCATE_PRODUCER_IDS})


class ApiSpec(NamedTuple):
    key: int
    name: str               # "Fetch"
    min_version: int        # the range we serve (the schemas' validVersions)
    max_version: int
    request_cls: type
    response_cls: type
    flexible_min: int | None  # first flexible version, None if none of ours is flexible
    advertised: bool = True   # listed in ApiVersions (False: codecs only, see NOT_ADVERTISED)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_min is not None and version >= self.flexible_min


def _build() -> dict[int, ApiSpec]:
    requests, responses = {}, {}
    for cls in ALL_MESSAGES.values():
        if cls.SCHEMA_TYPE == "request":
            requests[cls.API_KEY] = cls
        elif cls.SCHEMA_TYPE == "response":
            responses[cls.API_KEY] = cls
    table = {}
    for key in sorted(requests.keys() & responses.keys()):
        req, resp = requests[key], responses[key]
        lo = max(req.MIN_VERSION, resp.MIN_VERSION)
        hi = min(req.MAX_VERSION, resp.MAX_VERSION)
        name = req.__name__[: -len("Request")]
        table[key] = ApiSpec(key, name, lo, hi, req, resp, req.FLEXIBLE_MIN,
                             advertised=key not in NOT_ADVERTISED)
    return table


#: Every API with request and response schemas, by key: what framing encodes and decodes.
KNOWN_API_BY_KEY: dict[int, ApiSpec] = _build()
#: The APIs we serve and advertise in ApiVersions, by key.
API_BY_KEY: dict[int, ApiSpec] = {k: s for k, s in KNOWN_API_BY_KEY.items() if s.advertised}
API_BY_NAME: dict[str, ApiSpec] = {s.name: s for s in KNOWN_API_BY_KEY.values()}


def header_versions(api_key: int, api_version: int) -> tuple[int, int]:
    """(request header version, response header version) for a request.

    Flexible requests use request header v2 (tagged fields), others v1; responses likewise
    v1/v0. ApiVersions responses always use v0 so that a client that does not know the
    server's versions yet can parse them (KIP-511). Request header v0 is only used by
    ControlledShutdown v0, which we do not serve. Unknown APIs get (1, 0).
    """
    spec = KNOWN_API_BY_KEY.get(api_key)
    if spec is None:
        return 1, 0
    flexible = spec.is_flexible(api_version)
    if api_key == API_VERSIONS:
        return (2 if flexible else 1), 0
    return (2, 1) if flexible else (1, 0)


def supported_versions() -> list[tuple[int, int, int]]:
    """(api_key, min_version, max_version) for every API we advertise, by key."""
    return [(s.key, s.min_version, s.max_version) for s in API_BY_KEY.values()]
