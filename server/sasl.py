"""SASL on the Kafka listener: SaslHandshake v1 then SaslAuthenticate v0-2 (KIP-152), sans-IO.

Two kinds of login share it:
- nodes: SCRAM-SHA-512 as `User:kraftd-node-<id>`, credentials derived from the cluster secret
  (server/node_auth.py); only this path makes a connection a node's (quorum/node_claims.py);
- clients, on a SASL_PLAINTEXT or SASL_SSL listener: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN
  against the users' SCRAM credentials in the metadata log (`users(name, mechanism)`, the
  node's committed image). PLAIN's password is salted and hashed as the stored credential was
  and compared with its stored key: no password is kept or logged.
On a PLAINTEXT or SSL listener a client need not authenticate; a connection that never does is a
client. As on Kafka, a failed or out-of-order step is answered with its error and the connection
is closed after that answer.
"""
from __future__ import annotations

from typing import Callable

from scramp import ScramException, ScramMechanism
from scramp.core import Nonce

from ..protocol import messages as m
from ..protocol.errors import ErrorCode
from ..protocol.sasl_client import (SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthenticationFailed,  # noqa: F401
                                   SaslClientExchange)
from ..quorum.metadata.scram import MECHANISM_IDS, SCRAM_SHA_256, SCRAM_SHA_512, password_matches

from .node_auth import MECHANISM, NodeCredentials, node_id_of

PLAIN = "PLAIN"


def failed_message(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class SaslStep:
    """One answer, and whether the connection closes after it (with the reason, for the log)."""

    __slots__ = ("response", "close_reason")

    def __init__(self, response, close_reason: str = "") -> None:
        self.response = response
        self.close_reason = close_reason


UserCredentials = Callable[[str, int], object]  # (user, mechanism id) -> ScramCredential | None


class SaslServerSession:
    """One connection's exchange: start -> handshaken -> (SCRAM first message) -> authenticated."""

    def __init__(self, credentials: NodeCredentials | None, users: UserCredentials | None = None,
                 client_mechanisms: tuple = ()) -> None:
        self._credentials = credentials
        self._users = users
        self._client_mechanisms = tuple(client_mechanisms) if users is not None else ()
        self._scram = None
        self._username: str | None = None
        self._node_login = False       # the user was looked up as a node (the cluster secret)
        self.mechanism: str | None = None
        self.node_id: int | None = None  # set once authenticated as a node
        self.principal: str | None = None  # `User:<name>` once authenticated
        self.stage = "start"

    @property
    def mechanisms(self) -> list[str]:
        node = [MECHANISM] if self._credentials is not None else []
        return list(dict.fromkeys([*self._client_mechanisms, *node]))

    @property
    def authenticated(self) -> bool:
        return self.stage == "authenticated"

    @property
    def as_node(self) -> bool:
        """The login named a node (`kraftd-node-<id>`), whether or not it succeeded."""
        return node_id_of(self._username or "") is not None

    def handle(self, api_key: int, request, version: int = 1) -> SaslStep:
        if api_key == SASL_HANDSHAKE and version == 0:
            # Listed in ApiVersions only because librdkafka before 2.11 looks for it before any
            # SASL login; its raw-token exchange (no SaslAuthenticate) is not served.
            self.stage = "failed"
            return SaslStep(m.SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                                    mechanisms=self.mechanisms), "SaslHandshake v0 (raw SASL tokens)")
        if api_key == SASL_HANDSHAKE:
            return self._handshake(request)
        return self._authenticate(request)

    def _handshake(self, request) -> SaslStep:
        if self.stage != "start":
            return SaslStep(m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                    mechanisms=self.mechanisms), "sasl handshake out of order")
        if request.mechanism not in self.mechanisms:
            return SaslStep(m.SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                    mechanisms=self.mechanisms),
                            f"unsupported sasl mechanism {request.mechanism!r}")
        self.stage = "handshaken"
        self.mechanism = request.mechanism
        if request.mechanism != PLAIN:
            self._scram = ScramMechanism(request.mechanism).make_server(self._auth_info)
        return SaslStep(m.SaslHandshakeResponse(error_code=0, mechanisms=self.mechanisms))

    def _auth_info(self, username: str) -> tuple:
        """scramp's lookup: (salt, stored key, server key, iterations); KeyError: no such user."""
        self._username = username  # scramp does not expose who asked
        if node_id_of(username) is not None:
            if self._credentials is None or self.mechanism != MECHANISM:
                raise KeyError(username)  # node names log in as nodes only
            self._node_login = True
            return self._credentials.auth_info(username)
        if self.mechanism not in self._client_mechanisms:
            raise KeyError(username)
        stored = self._users(username, MECHANISM_IDS[self.mechanism])
        if stored is None:
            raise KeyError(username)
        return stored.salt, stored.stored_key, stored.server_key, stored.iterations

    def _authenticate(self, request) -> SaslStep:
        if self.stage == "handshaken" and self.mechanism == PLAIN:
            return self._plain(bytes(request.auth_bytes))
        if self.stage == "handshaken":
            try:
                self._scram.set_client_first(bytes(request.auth_bytes).decode())
                server_first = self._scram.get_server_first()
            except (ScramException, UnicodeDecodeError, KeyError) as e:
                return self._failed(f"client-first rejected: {e!r}")
            self.stage = "first-done"
            return SaslStep(_answer(server_first.encode()))
        if self.stage == "first-done":
            try:
                client_final = bytes(request.auth_bytes).decode()
                _accept_librdkafka_nonce(self._scram, client_final)
                self._scram.set_client_final(client_final)
                server_final = self._scram.get_server_final()
            except (ScramException, UnicodeDecodeError) as e:
                hint = ": another cluster secret?" if self._node_login else ""
                return self._failed(f"client proof rejected ({e}){hint}")
            self._logged_in(self._username or "")
            return SaslStep(_answer(server_final.encode()))
        return SaslStep(m.SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                   error_message=f"SaslAuthenticate in state {self.stage}",
                                                   auth_bytes=b""), "sasl authenticate out of order")

    def _plain(self, message: bytes) -> SaslStep:
        """RFC 4616: authzid NUL authcid NUL passwd, one round."""
        parts = message.split(b"\0")
        try:
            authzid, user, password = (p.decode() for p in parts) if len(parts) == 3 else (None, None, None)
        except UnicodeDecodeError:
            authzid = user = password = None
        self._username = user
        if not user or password is None:
            return self._failed("malformed PLAIN message")
        if authzid and authzid != user:
            return self._failed("an authorization id other than the user name")
        stored = mechanism = None
        if node_id_of(user) is None:  # nodes log in with SCRAM only
            for mechanism in (SCRAM_SHA_512, SCRAM_SHA_256):
                stored = self._users(user, mechanism)
                if stored is not None:
                    break
        if stored is None or not password_matches(mechanism, stored, password):
            return self._failed("wrong user name or password")
        self._logged_in(user)
        return SaslStep(_answer(b""))

    def _logged_in(self, user: str) -> None:
        self.stage = "authenticated"
        self._scram = None
        self.principal = "User:" + user
        self.node_id = node_id_of(user) if self._node_login else None

    def _failed(self, why: str) -> SaslStep:
        self.stage = "failed"
        self._scram = None
        user = self._username or "?"
        return SaslStep(m.SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                   error_message=failed_message(self.mechanism or "?"), auth_bytes=b""),
                        f"sasl authentication of {user} failed: {why}")


def _accept_librdkafka_nonce(server, client_final: str) -> None:
    """librdkafka before 2.6.1 (kcat's 2.0.2 among them) answers with its own nonce in front of
    the whole nonce the server sent: r=<client nonce><client nonce><server nonce>
    (confluentinc/librdkafka#4895). Kafka 3.8.1 to 3.9 accept a nonce that ends with the
    server's; so do we, for exactly that form, by telling scramp (its `nonce` attribute) to
    expect it: the proof is still checked over the messages as sent, and the server's fresh
    part is still required."""
    attributes = dict(part.split("=", 1) for part in client_final.split(",") if "=" in part)
    sent = str(server.nonce)
    client_part = sent[:len(sent) - len(str(server.s_nonce))]
    if attributes.get("r") == client_part + sent:
        server.nonce = Nonce(client_part + sent)


def _answer(auth_bytes: bytes):
    return m.SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=auth_bytes,
                                      session_lifetime_ms=0)


def NodeAuthExchange(username: str, password: str) -> SaslClientExchange:
    """A node's login to a peer: SCRAM-SHA-512 as `User:kraftd-node-<id>`, the cluster secret's
    password; a refused proof says the secret may differ."""
    return SaslClientExchange(MECHANISM, username, password, hint="is its cluster secret ours?")
