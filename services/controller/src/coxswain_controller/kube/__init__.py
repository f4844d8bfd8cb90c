"""The controller's one boundary with the Kubernetes API.

`client.api_client` builds the `kubernetes` ApiClient from flags or the pod's environment;
`api.request` and `api.open_watch` are every call the controller makes through it — the sources'
lists and watches, the status writer, Events, the Lease and the discovery CA Secret — so client
errors are mapped to `api.KubeError` (with the HTTP status) in one place.
"""
