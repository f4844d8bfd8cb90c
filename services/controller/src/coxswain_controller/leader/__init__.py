"""Leader election over a coordination.k8s.io/v1 Lease (issue 6, item 5): see `election`."""
