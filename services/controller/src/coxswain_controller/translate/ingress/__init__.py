"""The Ingress stage: `ingresses` (which Ingresses are ours, their rules, certificates and
verdicts) and `ingress_params` (their IngressClass parameters)."""
