"""The discovery flow's exception tree (the data plane's is `dataplane.errors`).

Every failure the discovery client distinguishes has its own class here, so the stream loop can
decide what to do (Nack, back off, stop) from the type alone. Third-party exceptions (grpc,
cryptography, OSError) are mapped at the boundary with `raise ... from exc`.
"""

from __future__ import annotations


class ProxyError(Exception):
    """Base of every error the proxy raises on purpose."""


# --------------------------------------------------------------------------------- snapshots


class SnapshotRejected(ProxyError):
    """A snapshot that cannot be applied: the last good one stays, and the proxy Nacks."""


class UndecodableResource(SnapshotRejected):
    """A resource whose body this build cannot read, or whose key does not match its body."""


class InvalidResource(SnapshotRejected):
    """A resource that decodes but fails the routing model's own validation."""


class MalformedSnapshot(SnapshotRejected):
    """A snapshot that breaks the protocol's shape (duplicate keys, `removed` on a full one)."""


class DeltaWithoutBase(SnapshotRejected):
    """A delta arrived while no snapshot is held: there is nothing to apply it to."""


class VersionMismatch(SnapshotRejected):
    """The applied resource set hashes to another version than the one the snapshot claims."""


# ------------------------------------------------------------------------------ credentials


class CredentialsError(ProxyError):
    """No usable SVID: the token, the trust bundle, the identity service or its answer."""


class TokenUnreadable(CredentialsError):
    """The projected ServiceAccount token file is missing or empty."""


class TrustBundleUnreadable(CredentialsError):
    """The mounted trust bundle is missing or holds no certificate."""


class IssuanceFailed(CredentialsError):
    """The identity service refused or could not be reached."""


class SvidRejected(CredentialsError):
    """The returned SVID does not chain to the trust bundle, or is not a SPIFFE SVID for our key."""


# ------------------------------------------------------------------------------- discovery


class ConfigError(ProxyError):
    """A discovery flag that cannot be used (an endpoint that does not parse, plaintext)."""
