"""Backend references: `resolver` resolves them to endpoint sets for HTTPRoutes and Ingresses,
consulting `grants` (ReferenceGrants) for those that cross namespaces."""
