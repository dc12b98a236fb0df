"""Who may do what: `authorizer = "acl"` decides with the ACLs in the metadata image, as Kafka's
StandardAuthorizer does; `authorizer = "none"` (the default) allows everything.

The rules, Kafka's:
- a node of the cluster (a peer that proved it is one) and a super user may do anything;
- otherwise the ACLs whose pattern covers the resource (a LITERAL of its name or of *, a
  PREFIXED of a prefix of it) and whose principal (or `User:*`) and host (or *) are the
  caller's decide: a DENY of the operation (or of ALL) refuses, whatever allows it; else an
  ALLOW of the operation, of ALL, or of one that implies it (READ, WRITE, DELETE and ALTER imply
  DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) permits;
- a resource no ACL covers at all is refused, unless `allow_everyone_if_no_acl_found`.
"""
from __future__ import annotations

from collections.abc import Callable

from .metadata.acls import (CLUSTER_NAME, IMPLIED_BY_ALLOW, SUPPORTED_OPERATIONS, WILDCARD, AclBinding, Operation,
                            PatternType, Permission, ResourceType)
from .peer import Peer

#: Kafka's value of an authorized-operations field that was not asked for.
NOT_REQUESTED = -2147483648


def operations_bitfield(operations) -> int:
    """Kafka's encoding of a set of operations: bit `code` set for each."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


class AllowEveryone:
    """`authorizer = "none"`."""

    enabled = False

    def allows(self, peer: Peer, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
        return True

    def authorized_operations(self, peer: Peer, resource_type: int, name: str) -> int:
        return operations_bitfield(SUPPORTED_OPERATIONS[resource_type])

    def allows_any(self, peer: Peer, operation: int, resource_type: int) -> bool:
        return True


class AclAuthorizer:
    """`authorizer = "acl"`: the ACLs of the image `image_of()` returns (this node's committed
    image, or the controller's), indexed by resource type and name each time they change."""

    enabled = True

    def __init__(self, image_of: Callable, super_users, allow_everyone_if_no_acl_found: bool = False) -> None:
        self._image_of = image_of
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_everyone_if_no_acl_found
        self._image = None                    # the image the index is of, at
        self._version = -1                    # its acls_version then
        self._literal: dict = {}              # (resource type, name) -> [binding]
        self._prefixed: dict = {}             # resource type -> [binding]

    def allows(self, peer: Peer, operation: int, resource_type: int, name: str = CLUSTER_NAME) -> bool:
        if peer.is_node or peer.principal in self.super_users:
            return True
        covering = self._covering(resource_type, name)
        if not covering:
            return self.allow_if_no_acl
        return self._decide(covering, peer, operation)

    def allows_any(self, peer: Peer, operation: int, resource_type: int) -> bool:
        """Whether the caller may do `operation` on some resource of the type (Kafka's
        authorizeByResourceType, which an idempotent producer needs for WRITE on topics): an
        ALLOW of it for the caller whose own resource the caller may indeed use."""
        if peer.is_node or peer.principal in self.super_users:
            return True
        self._refresh()
        for acl in self._image.acls.values():
            if (acl.resource_type == resource_type and acl.permission == Permission.ALLOW
                    and (acl.operation == operation or acl.operation == Operation.ALL)
                    and self.allows(peer, operation, resource_type, acl.resource_name)):
                return True
        return False

    def authorized_operations(self, peer: Peer, resource_type: int, name: str) -> int:
        """Kafka's authorized-operations field: the supported operations this caller may do
        (the ACLs covering the resource looked up once, for all of them)."""
        supported = SUPPORTED_OPERATIONS[resource_type]
        if peer.is_node or peer.principal in self.super_users:
            return operations_bitfield(supported)
        covering = self._covering(resource_type, name)
        if not covering:
            return operations_bitfield(supported) if self.allow_if_no_acl else 0
        return operations_bitfield(op for op in supported if self._decide(covering, peer, op))

    def _decide(self, covering: list[AclBinding], peer: Peer, operation: int) -> bool:
        allowed = False
        for acl in covering:
            if acl.host != WILDCARD and acl.host != peer.host:
                continue
            if acl.principal != peer.principal and not _principal_wildcard(acl.principal, peer.principal):
                continue
            if acl.permission == Permission.DENY:
                if acl.operation == operation or acl.operation == Operation.ALL:
                    return False
            elif not allowed and (acl.operation == operation or acl.operation == Operation.ALL
                                  or operation in IMPLIED_BY_ALLOW.get(acl.operation, ())):
                allowed = True
        return allowed

    def _covering(self, resource_type: int, name: str) -> list[AclBinding]:
        self._refresh()
        out = list(self._literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out += self._literal.get((resource_type, WILDCARD), ())
        out += [acl for acl in self._prefixed.get(resource_type, ()) if name.startswith(acl.resource_name)]
        return out

    def _refresh(self) -> None:
        image = self._image_of()
        if image is self._image and image.acls_version == self._version:
            return
        self._literal, self._prefixed = {}, {}
        for acl in image.acls.values():
            if acl.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            elif acl.pattern_type == PatternType.PREFIXED:
                self._prefixed.setdefault(acl.resource_type, []).append(acl)
        self._image, self._version = image, image.acls_version


def _principal_wildcard(acl_principal: str, principal: str) -> bool:
    """`User:*` covers every principal of type User."""
    kind, _, name = acl_principal.partition(":")
    return name == WILDCARD and principal.partition(":")[0] == kind


__all__ = ["AclAuthorizer", "AllowEveryone", "NOT_REQUESTED", "ResourceType", "Operation", "operations_bitfield"]
