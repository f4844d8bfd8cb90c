"""The Helm chart's tests and the helpers they share (chart rendering, tools, RBAC)."""
