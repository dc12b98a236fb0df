"""SASL for nodes (issue 21): SaslHandshake v1 + SaslAuthenticate with SCRAM-SHA-512, credentials
derived from the cluster secret (server/node_auth.py, server/sasl.py), sans-IO: the server's
session against the connecting side's exchange, and against a real SCRAM client (scramp)."""
from __future__ import annotations

import pytest
from scramp import ScramClient

from kraftd.protocol import messages as m
from kraftd.protocol.errors import ErrorCode
from kraftd.server.node_auth import MECHANISM, NodeCredentials, hkdf_sha256, node_id_of, node_user
from kraftd.server.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE, AuthenticationFailed, NodeAuthExchange, \
    SaslServerSession

SECRET = b"one cluster's secret"


def _run(exchange: NodeAuthExchange, server: SaslServerSession) -> list:
    """Drive both sides to the end; returns the server's steps."""
    steps = []
    while (request := exchange.next_request()) is not None:
        key, _, body = request
        step = server.handle(key, body)
        steps.append(step)
        exchange.on_response(step.response)
        if step.close_reason:
            break
    return steps


def test_a_node_with_the_secret_authenticates_as_itself():
    credentials = NodeCredentials(SECRET)
    server = SaslServerSession(credentials)
    steps = _run(NodeAuthExchange(node_user(2), credentials.password(2)), server)
    assert [s.close_reason for s in steps] == ["", "", ""]
    assert server.node_id == 2 and server.stage == "authenticated"


def test_another_secret_fails_on_both_sides():
    server = SaslServerSession(NodeCredentials(SECRET))
    other = NodeCredentials(b"another secret")
    exchange = NodeAuthExchange(node_user(2), other.password(2))
    with pytest.raises(AuthenticationFailed, match="SASL_AUTHENTICATION_FAILED.*cluster secret"):
        _run(exchange, server)
    assert server.node_id is None and server.stage == "failed"


def test_a_server_without_the_secret_cannot_pass_itself_off_as_a_node():
    """SCRAM's last message proves the server knows the credential: a server with another secret
    that accepted any proof would still fail the client's check."""
    ours = NodeCredentials(SECRET)
    exchange = NodeAuthExchange(node_user(1), ours.password(1))
    impostor = SaslServerSession(NodeCredentials(b"impostor"))
    key, _, body = exchange.next_request()
    exchange.on_response(impostor.handle(key, body).response)
    key, _, body = exchange.next_request()
    exchange.on_response(impostor.handle(key, body).response)
    key, _, body = exchange.next_request()
    forged_final = m.SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=b"v=AAAA",
                                              session_lifetime_ms=0)
    with pytest.raises(AuthenticationFailed, match="did not prove"):
        exchange.on_response(forged_final)


def test_only_node_users_exist():
    credentials = NodeCredentials(SECRET)
    server = SaslServerSession(credentials)
    assert server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism=MECHANISM)).response.error_code == 0
    client = ScramClient([MECHANISM], "alice", "whatever")
    step = server.handle(SASL_AUTHENTICATE, m.SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and step.close_reason
    assert server.node_id is None


def test_unsupported_mechanisms_and_steps_out_of_order_close_the_connection():
    server = SaslServerSession(NodeCredentials(SECRET))
    step = server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="PLAIN"))
    assert step.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and step.close_reason
    assert step.response.mechanisms == [MECHANISM]

    early = SaslServerSession(NodeCredentials(SECRET)).handle(SASL_AUTHENTICATE,
                                                               m.SaslAuthenticateRequest(auth_bytes=b"n,,n=x,r=y"))
    assert early.response.error_code == ErrorCode.ILLEGAL_SASL_STATE and early.close_reason

    no_secret = SaslServerSession(None).handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism=MECHANISM))
    assert no_secret.response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert no_secret.response.mechanisms == []


def test_credentials_are_per_node_and_per_secret():
    a, b = NodeCredentials(SECRET), NodeCredentials(b"other")
    assert a.password(1) != a.password(2) and a.password(1) != b.password(1)
    assert a.password(1) == NodeCredentials(SECRET).password(1)  # every node derives the same
    assert node_id_of("kraftd-node-12") == 12 and node_id_of("kraftd-node-x") is None and node_id_of("bob") is None
    # RFC 5869 test case 1 shape (our fixed salt): deterministic, the requested length.
    assert len(hkdf_sha256(SECRET, b"info", 42)) == 42 and hkdf_sha256(SECRET, b"i") == hkdf_sha256(SECRET, b"i")
    with pytest.raises(ValueError):
        NodeCredentials(b"")


def test_refused_authentications_are_logged_at_most_every_interval(monkeypatch):
    from kraftd.server import logging as server_logging

    clock = iter([100.0, 101.0, 105.0, 110.5, 111.0])
    monkeypatch.setattr(server_logging.time, "monotonic", lambda: next(clock))
    throttle = server_logging.LogThrottle(10.0)
    # The first is logged; the next two are held back; at 10.5 s one line stands for three.
    assert [throttle.due() for _ in range(5)] == [1, 0, 0, 3, 0]


# -- clients on a SASL listener (issue 24) -----------------------------------------------------

def _user_store(password: str = "pw", mechanism: int = 2):
    from kraftd.quorum.metadata.scram import credential, salted_password

    salt = bytes(range(16))
    stored = credential(mechanism, salt, salted_password(mechanism, password, salt, 4096), 4096)
    return lambda user, mech: stored if (user, mech) == ("alice", mechanism) else None


def _client_final(client_first_bare: str, server_first: str, nonce: str, password: str) -> str:
    """A SCRAM-SHA-512 client-final with `nonce` in it, its proof over the messages as sent."""
    import base64
    import hashlib
    import hmac

    from kraftd.quorum.metadata.scram import salted_password

    attrs = dict(p.split("=", 1) for p in server_first.split(","))
    salted = salted_password(2, password, base64.b64decode(attrs["s"]), int(attrs["i"]))
    without_proof = f"c=biws,r={nonce}"
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth_message, "sha512")
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


@pytest.mark.parametrize("form,accepted", [("rfc", True), ("librdkafka", True), ("client-only", False),
                                           ("server-only", False)])
def test_a_client_logs_in_with_the_nonce_forms_kafka_accepts(form, accepted):
    """RFC 5802's nonce, and librdkafka < 2.6.1's (its own nonce again in front: Kafka 3.8.1-3.9
    accept it); nothing else."""
    server = SaslServerSession(None, _user_store(), ("SCRAM-SHA-512",))
    assert server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).response.error_code == 0
    c_nonce = "abcdefghijklmnopqrstuvwx"
    first = server.handle(SASL_AUTHENTICATE, m.SaslAuthenticateRequest(auth_bytes=f"n,,n=alice,r={c_nonce}".encode()))
    server_first = bytes(first.response.auth_bytes).decode()
    full = dict(p.split("=", 1) for p in server_first.split(","))["r"]
    nonce = {"rfc": full, "librdkafka": c_nonce + full, "client-only": c_nonce, "server-only": full[len(c_nonce):]}[form]
    final = _client_final(f"n=alice,r={c_nonce}", server_first, nonce, "pw")
    step = server.handle(SASL_AUTHENTICATE, m.SaslAuthenticateRequest(auth_bytes=final.encode()))
    assert (step.response.error_code == 0) is accepted, step.close_reason
    assert (server.principal == "User:alice") is accepted and server.node_id is None


def test_plain_checks_the_password_against_the_stored_scram_key():
    def login(message: bytes):
        server = SaslServerSession(None, _user_store("s3cret"), ("PLAIN",))
        server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="PLAIN"))
        return server, server.handle(SASL_AUTHENTICATE, m.SaslAuthenticateRequest(auth_bytes=message))

    server, step = login(b"\0alice\0s3cret")
    assert step.response.error_code == 0 and server.principal == "User:alice"
    for bad in (b"\0alice\0wrong", b"bob\0alice\0s3cret", b"\0nobody\0s3cret", b"alice", b"\0alice\0s3cret\0x"):
        server, step = login(bad)
        assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED and step.close_reason
        assert server.principal is None


def test_a_user_named_like_a_node_never_becomes_a_node():
    """Only the cluster secret makes a connection a node's: a stored user kraftd-node-2 cannot
    log in at all (node names log in as nodes only)."""
    from kraftd.quorum.metadata.scram import credential, salted_password

    salt = bytes(16)
    stored = credential(2, salt, salted_password(2, "pw", salt, 4096), 4096)
    server = SaslServerSession(None, lambda user, mech: stored, ("SCRAM-SHA-512",))
    client = ScramClient(["SCRAM-SHA-512"], node_user(2), "pw")
    server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
    step = server.handle(SASL_AUTHENTICATE, m.SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
    assert step.response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert server.node_id is None and server.principal is None


def test_a_version_0_handshake_is_refused_and_ends_the_exchange():
    """SaslHandshake v0 is listed (librdkafka < 2.11 wants it) but its raw-token flow is not
    served: UNSUPPORTED_VERSION, and the connection closes after the answer."""
    server = SaslServerSession(None, _user_store(), ("SCRAM-SHA-512",))
    step = server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0)
    assert step.response.error_code == ErrorCode.UNSUPPORTED_VERSION and step.close_reason
    assert server.handle(SASL_HANDSHAKE, m.SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).response.error_code \
        == ErrorCode.ILLEGAL_SASL_STATE
