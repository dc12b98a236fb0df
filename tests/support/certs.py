"""Test certificates made with the `openssl` command, and each client's TLS settings for them.

`make_certs(dir)` writes a CA, a server certificate for localhost/127.0.0.1 (also what nodes
show their peers), a client certificate `CN=alice,OU=eng,O=acme` signed by the CA, and one
signed by another CA that the server does not trust. EC P-256 keys: quick to make.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

CLIENT_SUBJECT = "/O=acme/OU=eng/CN=alice"
CLIENT_PRINCIPAL = "User:CN=alice,OU=eng,O=acme"  # RFC 2253: the last RDN first


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{done.stderr}")


def _key(name: str, cwd: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=cwd)


def _ca(name: str, cwd: Path) -> None:
    _key(name, cwd)
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN=kraftd test {name}", cwd=cwd)


def _signed(name: str, subject: str, ca: str, extensions: str, cwd: Path) -> None:
    _key(name, cwd)
    _openssl("req", "-new", "-key", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=cwd)


@dataclass(frozen=True)
class Certs:
    dir: Path

    @property
    def ca(self) -> str:
        return str(self.dir / "ca.pem")

    def cert(self, name: str) -> str:
        return str(self.dir / f"{name}.pem")

    def key(self, name: str) -> str:
        return str(self.dir / f"{name}.key")

    def server_env(self, client_auth: str = "none") -> dict:
        """The KRAFTD_* settings of a TLS listener with the server certificate."""
        return {"KRAFTD_SECURITY_PROTOCOL": "SSL", "KRAFTD_TLS_CERT_FILE": self.cert("server"),
                "KRAFTD_TLS_KEY_FILE": self.key("server"), "KRAFTD_TLS_CA_FILE": self.ca,
                "KRAFTD_TLS_CLIENT_AUTH": client_auth}


def make_certs(directory: Path) -> Certs:
    directory.mkdir(parents=True, exist_ok=True)
    _ca("ca", directory)
    _ca("rogue-ca", directory)
    _signed("server", "/O=kraftd/CN=localhost", "ca",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
            "extendedKeyUsage=serverAuth,clientAuth\n", directory)
    client_ext = "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"
    _signed("alice", CLIENT_SUBJECT, "ca", client_ext, directory)
    _signed("mallory", "/CN=mallory", "rogue-ca", client_ext, directory)
    return Certs(directory)


@dataclass(frozen=True)
class ClientSecurity:
    """One client's security settings, in each client library's terms: it trusts `ca` (None:
    a plaintext connection) and, when `cert` is set, shows that certificate (mTLS); with
    `sasl = (mechanism, user, password)` it logs in (SASL_SSL, or SASL_PLAINTEXT without `ca`)."""
    ca: str | None
    cert: str | None = None
    key: str | None = None
    sasl: tuple | None = None

    @classmethod
    def of(cls, certs: "Certs | None", client: str | None = None, *, sasl: tuple | None = None) -> "ClientSecurity":
        if certs is None:
            return cls(None, sasl=sasl)
        return cls(certs.ca, certs.cert(client) if client else None, certs.key(client) if client else None, sasl)

    @property
    def protocol(self) -> str:
        if self.sasl:
            return "SASL_SSL" if self.ca else "SASL_PLAINTEXT"
        return "SSL" if self.ca else "PLAINTEXT"

    def kafka_python(self) -> dict:
        out = {"security_protocol": self.protocol}
        if self.ca:
            out.update(ssl_cafile=self.ca, ssl_check_hostname=True)
        if self.cert:
            out.update(ssl_certfile=self.cert, ssl_keyfile=self.key)
        if self.sasl:
            mechanism, user, password = self.sasl
            out.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        return out

    def confluent(self) -> dict:
        out = {"security.protocol": self.protocol}
        if self.ca:
            out["ssl.ca.location"] = self.ca
        if self.cert:
            out.update({"ssl.certificate.location": self.cert, "ssl.key.location": self.key})
        if self.sasl:
            mechanism, user, password = self.sasl
            out.update({"sasl.mechanisms": mechanism, "sasl.username": user, "sasl.password": password})
        return out

    def aiokafka(self) -> dict:
        out = {"security_protocol": self.protocol}
        if self.ca:
            from aiokafka.helpers import create_ssl_context

            out["ssl_context"] = create_ssl_context(cafile=self.ca, certfile=self.cert, keyfile=self.key)
        if self.sasl:
            mechanism, user, password = self.sasl
            out.update(sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=password)
        return out

    def kcat(self) -> list[str]:
        return [arg for k, v in self.confluent().items() for arg in ("-X", f"{k}={v}")]

    def java(self) -> dict:
        """Java client properties: a PEM trust store (Kafka 2.7+, KIP-651), a JAAS login."""
        out = {"security.protocol": self.protocol}
        if self.ca:
            out.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca})
        if self.sasl:
            mechanism, user, password = self.sasl
            module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
                      else "org.apache.kafka.common.security.scram.ScramLoginModule")
            out.update({"sasl.mechanism": mechanism,
                        "sasl.jaas.config": f'{module} required username="{user}" password="{password}";'})
        return out

    def kafkajs_args(self) -> list[str]:
        """roundtrip.js's CA_FILE [MECHANISM USER PASSWORD] arguments ('-': no TLS)."""
        return [self.ca or "-", *(self.sasl or ())]
