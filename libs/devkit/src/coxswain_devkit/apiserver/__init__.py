"""An in-process Kubernetes API server emulator for tests and the local demo.

    async with ApiServer() as api:            # in an async test
        config = kubernetes.client.Configuration(host=api.url)

    with ThreadedApiServer() as api:          # with the blocking client
        api.call(lambda server: server.faults.fail_next(2))

See docs/testing.md for what it emulates and what it leaves out.
"""

from coxswain_devkit.apiserver.server import ApiServer
from coxswain_devkit.apiserver.threaded import ThreadedApiServer

__all__ = ["ApiServer", "ThreadedApiServer"]
