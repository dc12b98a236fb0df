"""Node credentials from the cluster secret: every node derives every node's SCRAM credential.

A node authenticates to its peers as `User:kraftd-node-<id>` with SCRAM-SHA-512 (issue 21).
Its password is HKDF-SHA256(secret, "kraftd-node-<id>") (RFC 5869, with the stdlib's hmac), so a
node with the secret can prove it is a cluster member, and the servers it connects to can check
that without any credential store; a node started with another secret fails every exchange.
"""
from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache

from scramp import ScramMechanism

NODE_USER_PREFIX = "kraftd-node-"
MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096  # RFC 7677's minimum; the cost is paid once per connection and cached per node
_HKDF_SALT = b"kraftd cluster secret v1"


def node_user(node_id: int) -> str:
    return f"{NODE_USER_PREFIX}{node_id}"


def node_id_of(username: str) -> int | None:
    """kraftd-node-<id> -> id; anything else -> None."""
    if not username.startswith(NODE_USER_PREFIX):
        return None
    digits = username[len(NODE_USER_PREFIX):]
    return int(digits) if digits.isdigit() and len(digits) < 10 else None


def hkdf_sha256(secret: bytes, info: bytes, length: int = 32) -> bytes:
    """RFC 5869 extract-then-expand."""
    prk = hmac.new(_HKDF_SALT, secret, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


class NodeCredentials:
    """The SCRAM credentials of every node id, derived from one cluster secret."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the cluster secret is empty")
        self._secret = secret
        self._mechanism = ScramMechanism(MECHANISM)
        self.auth_info = lru_cache(maxsize=1024)(self._auth_info)

    def password(self, node_id: int) -> str:
        return hkdf_sha256(self._secret, b"password " + node_user(node_id).encode()).hex()

    def _auth_info(self, username: str) -> tuple:
        """(salt, stored key, server key, iterations) for a ScramServer; KeyError for a non-node."""
        node_id = node_id_of(username)
        if node_id is None:
            raise KeyError(username)
        salt = hkdf_sha256(self._secret, b"salt " + username.encode(), 16)
        return self._mechanism.make_auth_info(self.password(node_id), iteration_count=ITERATIONS, salt=salt)
