"""The devkit's load balancer: a loopback address per LoadBalancer Service, its ports relayed.

    async with LoadBalancer(api_url) as lb:     # or: coxswain-devkit lb --api-server URL
        ...

See `balancer` for the loop and the port offset, `relay` for the TCP and UDP relays.
"""

from coxswain_devkit.loadbalancer.balancer import (
    LOW_PORT_OFFSET,
    PORT_OFFSET_ANNOTATION,
    LoadBalancer,
)

__all__ = ["LoadBalancer", "LOW_PORT_OFFSET", "PORT_OFFSET_ANNOTATION"]
