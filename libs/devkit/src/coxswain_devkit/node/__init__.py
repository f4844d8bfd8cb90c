"""The devkit's node: it runs the Pods of Deployments whose image is a Coxswain image.

    async with NodeAgent(api_url) as agent:          # or: coxswain-devkit node --api-server URL
        ...

It plays the kubelet (processes, restarts, readiness, Pod status, `kubectl logs`), the
Deployment controller and the EndpointSlice controller. See `agent` for the loop, `launch` for
how a container becomes a process, and docs/testing.md for what it leaves out.
"""

from coxswain_devkit.node.agent import NodeAgent, default_launcher
from coxswain_devkit.node.container import Settings

__all__ = ["NodeAgent", "Settings", "default_launcher"]
