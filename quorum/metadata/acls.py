"""ACLs as Kafka defines them (KIP-11, KIP-290 prefixed patterns): a binding of a resource
pattern to an access-control entry, the codes the wire and the metadata records carry, and the
filters DescribeAcls and DeleteAcls match bindings with.

A binding is stored as an AccessControlEntryRecord in `__cluster_metadata` (its id is the
record's), removed by a RemoveAccessControlEntryRecord (quorum/metadata/image.py).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

WILDCARD = "*"          # a LITERAL resource name, a principal's name or a host that matches any
CLUSTER_NAME = "kafka-cluster"  # the one cluster resource's name


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1       # filters only: either pattern type, exactly the name given
    MATCH = 2     # filters only: every binding that applies to the name given
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


O = Operation
#: What an ACL on each resource type may grant (Kafka's AclEntry.supportedOperations), ALL aside.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset({O.READ, O.WRITE, O.CREATE, O.DESCRIBE, O.DELETE, O.ALTER, O.DESCRIBE_CONFIGS,
                                   O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({O.READ, O.DESCRIBE, O.DELETE}),
    ResourceType.CLUSTER: frozenset({O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS,
                                     O.IDEMPOTENT_WRITE, O.ALTER, O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({O.DESCRIBE, O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({O.DESCRIBE}),
    ResourceType.USER: frozenset({O.CREATE_TOKENS, O.DESCRIBE_TOKENS}),
}
#: An ALLOW of the key grants these too (Kafka: READ, WRITE, DELETE or ALTER imply DESCRIBE;
#: ALTER_CONFIGS implies DESCRIBE_CONFIGS). A DENY implies nothing.
IMPLIED_BY_ALLOW = {
    O.READ: (O.DESCRIBE,), O.WRITE: (O.DESCRIBE,), O.DELETE: (O.DESCRIBE,), O.ALTER: (O.DESCRIBE,),
    O.ALTER_CONFIGS: (O.DESCRIBE_CONFIGS,),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def applies_to(self, resource_type: int, name: str) -> bool:
        """Whether this binding's pattern covers the resource `name` of `resource_type`."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.LITERAL:
            return self.resource_name == name or self.resource_name == WILDCARD
        return self.pattern_type == PatternType.PREFIXED and name.startswith(self.resource_name)


def parse_principal(text: str | None) -> tuple[str, str] | None:
    """Kafka's `Type:name` (`User:alice`); None if it is not one."""
    if not text:
        return None
    kind, colon, name = text.partition(":")
    return (kind, name) if colon and kind and name else None


def creation_problem(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses this binding (INVALID_REQUEST), or None."""
    if binding.resource_type not in SUPPORTED_OPERATIONS:
        return f"Invalid resource type {binding.resource_type}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type {binding.pattern_type}"
    if binding.operation in (Operation.ANY, Operation.UNKNOWN) or binding.operation not in Operation.__members__.values():
        return f"Invalid operation {binding.operation}"
    if binding.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permission type {binding.permission}"
    if not binding.resource_name:
        return "Resource name should not be empty"
    if binding.resource_type == ResourceType.CLUSTER and binding.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if parse_principal(binding.principal) is None:
        return f"Could not parse principal from `{binding.principal}` (it must be Type:name)"
    if not binding.host:
        return "Host should not be empty (* is any host)"
    if binding.operation != Operation.ALL and binding.operation not in SUPPORTED_OPERATIONS[binding.resource_type]:
        return (f"ACL operation {Operation(binding.operation).name} is not supported for resource type "
                f"{ResourceType(binding.resource_type).name}")
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls' filter, or one of DeleteAcls': None / ANY fields match everything."""
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    @classmethod
    def of(cls, f) -> "AclFilter":
        """From a DescribeAclsRequest or a DeleteAclsRequest.DeleteAclsFilter."""
        return cls(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                   f.host_filter, f.operation, f.permission_type)

    def problem(self) -> str | None:
        """Why the filter is refused (INVALID_REQUEST), or None: no field may be UNKNOWN."""
        if self.resource_type not in ResourceType.__members__.values() or self.resource_type == ResourceType.UNKNOWN:
            return "The resource type filter is unknown"
        if self.pattern_type not in PatternType.__members__.values() or self.pattern_type == PatternType.UNKNOWN:
            return "The pattern type filter is unknown"
        if self.operation not in Operation.__members__.values() or self.operation == Operation.UNKNOWN:
            return "The operation filter is unknown"
        if self.permission not in Permission.__members__.values() or self.permission == Permission.UNKNOWN:
            return "The permission type filter is unknown"
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._pattern_matches(b):
            return False
        return ((self.principal is None or self.principal == b.principal)
                and (self.host is None or self.host == b.host)
                and (self.operation == Operation.ANY or self.operation == b.operation)
                and (self.permission == Permission.ANY or self.permission == b.permission))

    def _pattern_matches(self, b: AclBinding) -> bool:
        name, kind = self.resource_name, self.pattern_type
        if kind == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.resource_name == name or b.resource_name == WILDCARD
            return b.pattern_type == PatternType.PREFIXED and name.startswith(b.resource_name)
        if kind != PatternType.ANY and kind != b.pattern_type:
            return False
        return name is None or name == b.resource_name
