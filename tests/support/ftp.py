"""An FTP server on loopback, for tests: pyftpdlib in a thread, this stands in for an ftp:// data source. One
user with a password, read-only (`elr`) over one directory; port 0 gives a free port."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

with warnings.catch_warnings():  # pyftpdlib 2.x on Python 3.11 imports the stdlib's deprecated asyncore/asynchat
    warnings.simplefilter("ignore", DeprecationWarning)
    from pyftpdlib.authorizers import DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler
    from pyftpdlib.servers import FTPServer


class LoopbackFtp:
    def __init__(self, root: Path, user: str, password: str, anonymous: bool = False) -> None:
        authorizer = DummyAuthorizer()
        if anonymous:  # what an `ftp:` source reads: specs carry no credentials
            authorizer.add_anonymous(str(root), perm="elr")
        else:
            authorizer.add_user(user, password, str(root), perm="elr")
        handler = type("Handler", (FTPHandler,), {"authorizer": authorizer, "passive_ports": None})
        self.server = FTPServer(("127.0.0.1", 0), handler)
        host, port = self.server.address
        self.url = f"ftp://{host}:{port}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"timeout": 0.05}, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.close_all()
        self._thread.join(timeout=5)
