"""The pipeline client's TLS and SASL, from the `kafka.*` options Spark's Kafka source takes.

- `kafka.security.protocol`: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL.
- `kafka.ssl.truststore.location` (a PEM file) or `kafka.ssl.truststore.certificates` (PEM
  text), with `kafka.ssl.truststore.type=PEM` (Kafka's KIP-651 names; JKS and PKCS12 stores
  are refused, naming the option). Without a trust store, the system's CAs.
- `kafka.ssl.keystore.location` with `kafka.ssl.keystore.type=PEM`: a PEM file holding the
  client's private key and certificate chain (mTLS), `kafka.ssl.key.password` if the key is
  encrypted.
- `kafka.ssl.endpoint.identification.algorithm`: `https` (default) checks the broker's host
  name against its certificate, an empty value does not (Kafka's meaning).
- SASL (`kafka.security.protocol` SASL_PLAINTEXT or SASL_SSL): `kafka.sasl.mechanism` (PLAIN,
  SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's default, GSSAPI, is refused) and the user name and
  password of `kafka.sasl.jaas.config`, as Spark's Kafka source takes them
  (`org.apache.kafka.common.security.scram.ScramLoginModule required username="..."
  password="...";`, or the PlainLoginModule's).

An SSLContext cannot be pickled, so the options travel to Spark's executors and each builds its
own context.
"""
from __future__ import annotations

import re
import ssl

from kraftd.protocol.sasl_client import MECHANISMS

from .options import OptionError

__all__ = ["client_tls", "client_sasl"]
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS_FIELD = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _protocol(opts) -> str:
    protocol = opts.client_option("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise OptionError(f"kafka.security.protocol={protocol}: one of {', '.join(PROTOCOLS)}")
    return protocol


def client_sasl(opts) -> tuple | None:
    """(mechanism, user, password) for a SASL protocol, None otherwise."""
    if not _protocol(opts).startswith("SASL_"):
        return None
    mechanism = opts.client_option("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise OptionError(f"kafka.sasl.mechanism={mechanism}: format(\"kraftd\") logs in with "
                          f"{', '.join(MECHANISMS)}")
    fields = {k: v.replace('\\"', '"').replace("\\\\", "\\")
              for k, v in _JAAS_FIELD.findall(opts.client_option("sasl.jaas.config", "") or "")}
    if "username" not in fields or "password" not in fields:
        raise OptionError("kafka.sasl.jaas.config must name username=\"...\" and password=\"...\" "
                          "(the Scram or Plain login module's)")
    return mechanism, fields["username"], fields["password"]


def client_tls(opts) -> ssl.SSLContext | None:
    """The TLS context the options ask for, None for PLAINTEXT; OptionError when they ask for
    what this client cannot do."""
    protocol = _protocol(opts)
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    store_type = opts.client_option("ssl.truststore.type", "PEM").strip().upper()
    location = opts.client_option("ssl.truststore.location")
    certificates = opts.client_option("ssl.truststore.certificates")
    if (location or certificates) and store_type != "PEM":
        raise OptionError(f"kafka.ssl.truststore.type={store_type}: format(\"kraftd\") reads PEM trust stores only "
                          "(kafka.ssl.truststore.type=PEM)")
    try:
        context = ssl.create_default_context(cafile=location or None, cadata=certificates or None)
    except (OSError, ssl.SSLError) as e:
        raise OptionError(f"kafka.ssl.truststore: {e}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if opts.client_option("ssl.endpoint.identification.algorithm", "https").strip() == "":
        context.check_hostname = False
    keystore = opts.client_option("ssl.keystore.location")
    if keystore:
        keystore_type = opts.client_option("ssl.keystore.type", "PEM").strip().upper()
        if keystore_type != "PEM":
            raise OptionError(f"kafka.ssl.keystore.type={keystore_type}: format(\"kraftd\") reads PEM key stores only")
        try:
            context.load_cert_chain(keystore, password=opts.client_option("ssl.key.password"))
        except (OSError, ssl.SSLError) as e:
            raise OptionError(f"kafka.ssl.keystore.location {keystore}: {e}") from None
    return context
