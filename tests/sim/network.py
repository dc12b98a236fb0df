"""Messages between simulated nodes and clients: delayed, dropped, duplicated, reordered, and
cut by symmetric or one-way partitions. Every choice comes from the run's seeded RNG."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kraftd.protocol import messages as m
from kraftd.protocol.framing import decode_request, decode_response, encode_request, encode_response, frame_bytes


@dataclass(slots=True)
class Message:
    source: Any          # a node id (int) or a client name (str)
    destination: Any
    is_request: bool
    api_key: int
    api_version: int
    correlation_id: int
    body: Any
    incarnation: int = 0   # of the requesting node: an answer to an earlier life is dropped
    sent_ms: int | None = None


def on_the_wire(message: Message, client_id: str) -> Message:
    """The message as the other node decodes it: encoded at its version with the project's codec
    (the bytes a socket would carry), then decoded. Version-gated fields, tagged fields and codec
    bugs show as they would between real processes."""
    header = m.RequestHeader(request_api_key=message.api_key, request_api_version=message.api_version,
                             correlation_id=message.correlation_id, client_id=client_id)
    parts: list = []
    if message.is_request:
        encode_request(header, message.body, parts)
        _, body = decode_request(memoryview(frame_bytes(parts))[4:])
    else:
        encode_response(header, message.body, parts)
        _, body = decode_response(memoryview(frame_bytes(parts))[4:], message.api_key, message.api_version)
    return dataclasses.replace(message, body=body)


LATE_MS = 450  # past the simulation's request timeout (400 ms)
# Requests no broker can take twice: a second copy of a CreateTopics handled after a DeleteTopics
# that followed the first brings the topic back (in Kafka too). TCP never delivers a client's
# request twice, so the network does not duplicate these (it still drops, delays and reorders
# them); the retries a client or a forwarding node makes on its own remain (sim seed 443: a
# duplicated create, one copy forwarded late, re-created a topic the admin had deleted).
NOT_REPEATABLE = frozenset({19, 20})  # CreateTopics, DeleteTopics


class Network:
    def __init__(self, rng, rates) -> None:
        self.rng = rng
        self.rates = rates
        self.cut: set = set()   # (a, b): nothing from a reaches b
        self.sent = self.dropped = self.duplicated = 0

    def heal(self) -> None:
        self.cut.clear()

    def faults_off(self) -> None:
        self.rates = type(self.rates)(**{**self.rates.__dict__, "drop": 0.0, "duplicate": 0.0, "late_share": 0.0})

    def delays(self, message: Message) -> list[int]:
        """Delivery delays for one message: none if dropped, two if duplicated."""
        self.sent += 1
        if (message.source, message.destination) in self.cut:
            self.dropped += 1
            return []
        r = self.rates
        if r.drop and self.rng.random() < r.drop:
            self.dropped += 1
            return []
        if r.late_share and self.rng.random() < r.late_share:
            # A long tail past the request timeout: the answer comes after the sender gave up.
            out = [self.rng.randint(LATE_MS, 2 * LATE_MS)]
        else:
            out = [self.rng.randint(r.min_delay_ms, r.max_delay_ms)]
        if r.duplicate and self.rng.random() < r.duplicate and message.api_key not in NOT_REPEATABLE:
            self.duplicated += 1
            out.append(self.rng.randint(r.min_delay_ms, r.max_delay_ms * 2))
        return out

    def partition(self, nodes: list, clients: list) -> str:
        """Cut the cluster in two (or one direction between two groups). Returns a description."""
        rng = self.rng
        side = set(rng.sample(nodes, rng.randint(1, len(nodes) // 2)))
        other = [n for n in nodes if n not in side]
        one_way = rng.random() < self.rates.one_way_share
        self.cut.clear()
        for a in side:
            for b in other:
                self.cut.add((a, b))
                if not one_way:
                    self.cut.add((b, a))
        # Clients sit with the majority side, except sometimes.
        for c in clients:
            for a in (side if rng.random() < 0.8 else other):
                self.cut.add((c, a))
                self.cut.add((a, c))
        return f"{'one-way' if one_way else 'two-way'} {sorted(side)} | {sorted(other)}"
