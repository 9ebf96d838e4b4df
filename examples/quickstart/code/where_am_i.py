"""Print where the driver runs. On the local cluster, `argus local up` tells each node's processes
their role in ARGUS_LOCAL_NODE (both nodes share one host, so the hostname cannot)."""

import os
import socket

role = os.environ.get("ARGUS_LOCAL_NODE", "unknown (not the argus local cluster)")
print(f"driver runs on host {socket.gethostname()}, node role: {role}")
