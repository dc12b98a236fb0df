"""SASL on the Kafka listener: SaslHandshake v1 then SaslAuthenticate v0-2 (KIP-152), sans-IO.

Today it authenticates nodes only (SCRAM-SHA-512 as `User:kraftd-node-<id>`, credentials from
the cluster secret, server/node_auth.py). Clients need no SASL: a connection that never
authenticates is a client, and node-only requests from it are refused (quorum/node_claims.py).
As on Kafka, a failed or out-of-order step is answered with its error and the connection is
closed after that answer.
"""
from __future__ import annotations

from scramp import ScramException

from ..protocol import messages as m
from ..protocol.errors import ErrorCode

from .node_auth import MECHANISM, NodeCredentials, node_id_of

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
FAILED_MESSAGE = f"Authentication failed during authentication due to invalid credentials with SASL mechanism {MECHANISM}"


class SaslStep:
    """One answer, and whether the connection closes after it (with the reason, for the log)."""

    __slots__ = ("response", "close_reason")

    def __init__(self, response, close_reason: str = "") -> None:
        self.response = response
        self.close_reason = close_reason


class SaslServerSession:
    """One connection's exchange: start -> handshaken -> (SCRAM first message) -> authenticated."""

    def __init__(self, credentials: NodeCredentials | None) -> None:
        self._credentials = credentials
        self._scram = None
        self._username: str | None = None
        self.node_id: int | None = None  # set once authenticated as a node
        self.stage = "start"

    @property
    def mechanisms(self) -> list[str]:
        return [MECHANISM] if self._credentials is not None else []

    def handle(self, api_key: int, request) -> SaslStep:
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
        self._scram = self._credentials and _scram_server(self._credentials, self)
        return SaslStep(m.SaslHandshakeResponse(error_code=0, mechanisms=self.mechanisms))

    def _authenticate(self, request) -> SaslStep:
        if self.stage == "handshaken":
            try:
                self._scram.set_client_first(bytes(request.auth_bytes).decode())
                server_first = self._scram.get_server_first()
            except (ScramException, UnicodeDecodeError, KeyError) as e:
                return self._failed(f"client-first rejected: {e}")
            self.stage = "first-done"
            return SaslStep(_answer(server_first.encode()))
        if self.stage == "first-done":
            try:
                self._scram.set_client_final(bytes(request.auth_bytes).decode())
                server_final = self._scram.get_server_final()
            except (ScramException, UnicodeDecodeError) as e:
                return self._failed(f"client proof rejected ({e}): another cluster secret?")
            self.stage = "authenticated"
            self.node_id = node_id_of(self._username or "")
            self._scram = None
            return SaslStep(_answer(server_final.encode()))
        return SaslStep(m.SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                   error_message=f"SaslAuthenticate in state {self.stage}",
                                                   auth_bytes=b""), "sasl authenticate out of order")

    def _failed(self, why: str) -> SaslStep:
        self.stage = "failed"
        self._scram = None
        user = self._username or "?"
        return SaslStep(m.SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                   error_message=FAILED_MESSAGE, auth_bytes=b""),
                        f"sasl authentication of {user} failed: {why}")


def _answer(auth_bytes: bytes):
    return m.SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=auth_bytes,
                                      session_lifetime_ms=0)


def _scram_server(credentials: NodeCredentials, session: SaslServerSession):
    from scramp import ScramMechanism

    def auth_fn(username: str):
        session._username = username  # scramp does not expose who asked
        return credentials.auth_info(username)

    return ScramMechanism(MECHANISM).make_server(auth_fn)


class NodeAuthExchange:
    """The connecting side: SaslHandshake, then SCRAM's two SaslAuthenticate rounds, as
    `User:kraftd-node-<id>`. `next_request()` gives (api key, version, request) or None when
    done; `on_response()` takes each answer and raises AuthenticationFailed with the reason."""

    HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2

    def __init__(self, username: str, password: str) -> None:
        from scramp import ScramClient

        self._client = ScramClient([MECHANISM], username, password)
        self._step = 0  # 0: handshake, 1: client-first, 2: client-final, 3: done
        self.done = False

    def next_request(self):
        if self._step == 0:
            return SASL_HANDSHAKE, self.HANDSHAKE_VERSION, m.SaslHandshakeRequest(mechanism=MECHANISM)
        if self._step == 1:
            first = self._client.get_client_first().encode()
            return SASL_AUTHENTICATE, self.AUTHENTICATE_VERSION, m.SaslAuthenticateRequest(auth_bytes=first)
        if self._step == 2:
            final = self._client.get_client_final().encode()
            return SASL_AUTHENTICATE, self.AUTHENTICATE_VERSION, m.SaslAuthenticateRequest(auth_bytes=final)
        return None

    def on_response(self, response) -> None:
        if response.error_code:
            message = getattr(response, "error_message", None) or ""
            raise AuthenticationFailed(f"{ErrorCode(response.error_code).name} at step {self._step}"
                                       + (f": {message}" if message else "")
                                       + ("; is its cluster secret ours?" if self._step == 2 else ""))
        try:
            if self._step == 1:
                self._client.set_server_first(bytes(response.auth_bytes).decode())
            elif self._step == 2:
                self._client.set_server_final(bytes(response.auth_bytes).decode())
                self.done = True
        except (ScramException, UnicodeDecodeError) as e:
            raise AuthenticationFailed(f"the server did not prove it knows the cluster secret ({e})") from None
        self._step += 1


class AuthenticationFailed(Exception):
    pass
