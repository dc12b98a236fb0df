"""Who sent a request: the connection's address, the node it proved to be (None: a client), and
its principal.

The shell fills `node_id` only for a connection that authenticated as `User:kraftd-node-<id>`
(SCRAM with the cluster secret, server/sasl.py); the simulation and the test contexts fill it
for the nodes they play. `principal` is Kafka's: `User:<name>` after a SASL login,
`User:<certificate subject>` for a TLS client that showed one, `User:ANONYMOUS` otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Peer:
    address: str = ""
    node_id: int | None = None
    principal: str = "User:ANONYMOUS"

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    @property
    def is_node(self) -> bool:
        return self.node_id is not None


CLIENT = Peer()
