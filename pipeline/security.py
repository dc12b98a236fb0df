"""The pipeline client's TLS, from the `kafka.*` options Spark's Kafka source takes.

- `kafka.security.protocol`: PLAINTEXT (default) or SSL. SASL is not there yet: refused.
- `kafka.ssl.truststore.location` (a PEM file) or `kafka.ssl.truststore.certificates` (PEM
  text), with `kafka.ssl.truststore.type=PEM` (Kafka's KIP-651 names; JKS and PKCS12 stores
  are refused, naming the option). Without a trust store, the system's CAs.
- `kafka.ssl.keystore.location` with `kafka.ssl.keystore.type=PEM`: a PEM file holding the
  client's private key and certificate chain (mTLS), `kafka.ssl.key.password` if the key is
  encrypted.
- `kafka.ssl.endpoint.identification.algorithm`: `https` (default) checks the broker's host
  name against its certificate, an empty value does not (Kafka's meaning).

An SSLContext cannot be pickled, so the options travel to Spark's executors and each builds its
own context.
"""
from __future__ import annotations

import ssl

from .options import OptionError

__all__ = ["client_tls"]


def client_tls(opts) -> ssl.SSLContext | None:
    """The TLS context the options ask for, None for PLAINTEXT; OptionError when they ask for
    what this client cannot do."""
    protocol = opts.client_option("security.protocol", "PLAINTEXT").strip().upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SSL":
        raise OptionError(f"kafka.security.protocol={protocol}: format(\"kraftd\") speaks PLAINTEXT and SSL "
                          "(SASL is not supported yet)")
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
