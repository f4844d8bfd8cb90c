"""CoxswainPolicy: the policy model (`coxswain_routing.Policy`) for Gateway API routes."""
