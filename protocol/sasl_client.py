"""The connecting side of a SASL login, sans-IO: SaslHandshake v1, then SaslAuthenticate v2
rounds, with SCRAM-SHA-256/512 (scramp's client) or PLAIN. Nodes log in to their peers with it
(server/peers.py, SCRAM-SHA-512 with the cluster secret), and so does kraftd's own blocking
client (kraftd/client.py: the pipeline, the CLI).

`next_request()` gives (api key, version, request), or None once logged in; `on_response()`
takes each answer and raises AuthenticationFailed with the reason."""
from __future__ import annotations

from scramp import ScramClient, ScramException

from . import messages as m
from .errors import ErrorCode

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")


class AuthenticationFailed(Exception):
    pass


class SaslClientExchange:
    HANDSHAKE_VERSION, AUTHENTICATE_VERSION = 1, 2

    def __init__(self, mechanism: str, username: str, password: str, *, hint: str = "") -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"SASL mechanism {mechanism!r}: one of {', '.join(MECHANISMS)}")
        self.mechanism = mechanism
        self._plain = (b"\0" + username.encode() + b"\0" + password.encode()) if mechanism == "PLAIN" else None
        self._client = None if mechanism == "PLAIN" else ScramClient([mechanism], username, password)
        self._hint = hint  # said with a refused proof (a node: "is its cluster secret ours?")
        self._step = 0  # 0: handshake, 1: client-first (PLAIN: the one message), 2: client-final, 3: done
        self.done = False

    def next_request(self):
        if self._step == 0:
            return SASL_HANDSHAKE, self.HANDSHAKE_VERSION, m.SaslHandshakeRequest(mechanism=self.mechanism)
        if self._step == 1:
            first = self._plain if self._plain is not None else self._client.get_client_first().encode()
            return SASL_AUTHENTICATE, self.AUTHENTICATE_VERSION, m.SaslAuthenticateRequest(auth_bytes=first)
        if self._step == 2:
            final = self._client.get_client_final().encode()
            return SASL_AUTHENTICATE, self.AUTHENTICATE_VERSION, m.SaslAuthenticateRequest(auth_bytes=final)
        return None

    def on_response(self, response) -> None:
        if response.error_code:
            message = getattr(response, "error_message", None) or ""
            proof = self._step == 2 or (self._step == 1 and self._plain is not None)
            raise AuthenticationFailed(f"{ErrorCode(response.error_code).name} at step {self._step}"
                                       + (f": {message}" if message else "")
                                       + (f"; {self._hint}" if proof and self._hint else ""))
        try:
            if self._step == 1 and self._plain is not None:
                self._step = 2  # PLAIN has one round: done after it
                self.done = True
            elif self._step == 1:
                self._client.set_server_first(bytes(response.auth_bytes).decode())
            elif self._step == 2:
                self._client.set_server_final(bytes(response.auth_bytes).decode())
                self.done = True
        except (ScramException, UnicodeDecodeError) as e:
            raise AuthenticationFailed(f"the server did not prove it knows the password ({e})"
                                       + (f"; {self._hint}" if self._hint else "")) from None
        self._step += 1
