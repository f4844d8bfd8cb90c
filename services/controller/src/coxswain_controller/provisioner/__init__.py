"""The provisioner (leader only): each Gateway's desired objects made so, and nothing else kept.

`provisioner.Provisioner` is the reconcile loop; `plan` compares a desired object with a live
one and builds the write; `resources` knows where each kind lives and which objects are ours.
Every call goes through the `kube` boundary.
"""
