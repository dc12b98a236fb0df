"""TLS for the Kafka listener (security_protocol SSL) and for the connections to peers.

The listener presents tls_cert_file/tls_key_file; with tls_client_auth requested or required it
asks clients for a certificate and verifies it against tls_ca_file. A node connecting to a peer
verifies the peer's certificate against tls_ca_file and its host name (Kafka's default
ssl.endpoint.identification.algorithm=https), and shows its own certificate, so that a listener
requiring client certificates accepts its peers.

A client's principal is `User:<certificate subject>` in RFC 2253 form (what Kafka's
DefaultKafkaPrincipalBuilder takes from X500Principal.getName()), `User:ANONYMOUS` without one.
"""
from __future__ import annotations

import ssl

ANONYMOUS = "User:ANONYMOUS"

# Short names RFC 2253 (and Java's X500Principal) use; any other attribute keeps its name.
_SHORT = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
          "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
          "domainComponent": "DC", "userId": "UID"}


def listener_context(cert_file: str, key_file: str, ca_file: str | None, client_auth: str) -> ssl.SSLContext:
    """The Kafka listener's context: TLS 1.2 or later, client certificates as configured."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    context.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[client_auth]
    return context


def peer_context(cert_file: str, key_file: str, ca_file: str | None) -> ssl.SSLContext:
    """A node's context toward its peers: their certificate and host name are verified."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;=' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def subject_name(peercert: dict) -> str:
    """A certificate's subject as RFC 2253 writes it: the last RDN first, `CN=a,O=b`."""
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def principal_of(ssl_object) -> str:
    """`User:<subject>` of the certificate a TLS client showed (verified), else ANONYMOUS."""
    if ssl_object is None:
        return ANONYMOUS
    cert = ssl_object.getpeercert()
    if not cert:
        return ANONYMOUS
    return "User:" + subject_name(cert)

