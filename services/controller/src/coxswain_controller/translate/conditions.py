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
    # A Gateway's: True while some frontend validation is AllowInsecureFallback, else withdrawn.
    INSECURE_FRONTEND_VALIDATION_MODE = "InsecureFrontendValidationMode"
    # A route's, written only while True (status.merge withdraws it otherwise): some rules are
    # dropped while the others are served (Gateway API RouteConditionPartiallyInvalid).
    PARTIALLY_INVALID = "PartiallyInvalid"


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
    # Client certificates (a Gateway's spec.tls) and CA bundles (listeners, BackendTLSPolicy).
    NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
    INVALID_CA_CERTIFICATE_REF = "InvalidCACertificateRef"
    INVALID_CA_CERTIFICATE_KIND = "InvalidCACertificateKind"
    INVALID_CLIENT_CERTIFICATE_REF = "InvalidClientCertificateRef"
    LISTENERS_NOT_RESOLVED = "ListenersNotResolved"
    CONFIGURATION_CHANGED = "ConfigurationChanged"
    # Policies (GEP-713): one that another outranks on each of its targets.
    CONFLICTED = "Conflicted"
    # ListenerSets (GEP-1713): a Gateway's allowedListeners refusing one, its parent refused or
    # not programmed.
    NOT_ALLOWED = "NotAllowed"
    PARENT_NOT_ACCEPTED = "ParentNotAccepted"
    PARENT_NOT_PROGRAMMED = "ParentNotProgrammed"
