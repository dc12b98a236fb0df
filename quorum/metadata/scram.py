"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka keeps them: from the salted password an admin
client sends (AlterUserScramCredentials), the controller derives the stored key and the server
key, and the image keeps those; a PLAIN password is checked by salting it the same way.

Kafka's names and limits: mechanism 1 is SCRAM-SHA-256, 2 is SCRAM-SHA-512; 4,096 to 16,384
iterations. Passwords are taken as UTF-8 without SASLprep, as Kafka's ScramFormatter does.
"""
from __future__ import annotations

import hashlib
import hmac

from .image import ScramCredential

SCRAM_SHA_256, SCRAM_SHA_512 = 1, 2
MECHANISM_NAMES = {SCRAM_SHA_256: "SCRAM-SHA-256", SCRAM_SHA_512: "SCRAM-SHA-512"}
MECHANISM_IDS = {name: mechanism for mechanism, name in MECHANISM_NAMES.items()}
_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def credential(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    """StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword, "Server Key")."""
    name = _HASHES[mechanism]
    client_key = hmac.digest(salted_password, b"Client Key", name)
    server_key = hmac.digest(salted_password, b"Server Key", name)
    return ScramCredential(bytes(salt), hashlib.new(name, client_key).digest(), server_key, iterations)


def salted_password(mechanism: int, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with HMAC of the mechanism's hash."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def password_matches(mechanism: int, stored: ScramCredential, password: str) -> bool:
    """Whether `password` is the one `stored` was made from (a PLAIN login): constant time."""
    salted = salted_password(mechanism, password, stored.salt, stored.iterations)
    return hmac.compare_digest(credential(mechanism, stored.salt, salted, stored.iterations).stored_key,
                               stored.stored_key)
