"""Condition types and reasons, as the Gateway API spells them (one place, as StrEnums)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ConditionType", "Reason"]


class ConditionType(StrEnum):
    ACCEPTED = "Accepted"
    PROGRAMMED = "Programmed"
    RESOLVED_REFS = "ResolvedRefs"
    CONFLICTED = "Conflicted"
    # Negative polarity: written only while True, withdrawn otherwise (status.merge).
    OVERLAPPING_TLS_CONFIG = "OverlappingTLSConfig"


class Reason(StrEnum):
    ACCEPTED = "Accepted"
    PROGRAMMED = "Programmed"
    RESOLVED_REFS = "ResolvedRefs"
    NO_CONFLICTS = "NoConflicts"
    PENDING = "Pending"
    INVALID = "Invalid"
    INVALID_PARAMETERS = "InvalidParameters"
    LISTENERS_NOT_VALID = "ListenersNotValid"
    UNSUPPORTED_PROTOCOL = "UnsupportedProtocol"
    UNSUPPORTED_VALUE = "UnsupportedValue"
    PROTOCOL_CONFLICT = "ProtocolConflict"
    HOSTNAME_CONFLICT = "HostnameConflict"
    INVALID_CERTIFICATE_REF = "InvalidCertificateRef"
    INVALID_ROUTE_KINDS = "InvalidRouteKinds"
    REF_NOT_PERMITTED = "RefNotPermitted"
    NO_MATCHING_PARENT = "NoMatchingParent"
    NOT_ALLOWED_BY_LISTENERS = "NotAllowedByListeners"
    NO_MATCHING_LISTENER_HOSTNAME = "NoMatchingListenerHostname"
    ROUTE_CONFLICT = "RouteConflict"
    BACKEND_NOT_FOUND = "BackendNotFound"
    INVALID_KIND = "InvalidKind"
    UNSUPPORTED_ADDRESS = "UnsupportedAddress"
    ADDRESS_NOT_ASSIGNED = "AddressNotAssigned"
    ADDRESS_NOT_USABLE = "AddressNotUsable"
    OVERLAPPING_HOSTNAMES = "OverlappingHostnames"
