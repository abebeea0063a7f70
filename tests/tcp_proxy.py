"""A TCP proxy in threads, to stop a server as its clients see it without stopping it.

`Proxy` forwards connections from a local port to the real server; `Proxy.stop` closes
the listening socket and every forwarded connection at once, as a server that went down
(new connections are refused, open ones break). The shared server itself keeps running
for everyone else.
"""

from __future__ import annotations

import socket
import threading


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``host``:``target`` until `stop`."""

    def __init__(self, host: str, target: int) -> None:
        self.host, self.target = host, target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection((self.host, self.target))
            with self.lock:
                if self.stopped:
                    client.close()
                    server.close()
                    return
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        """The server "goes down": refuse new connections, break the open ones."""
        with self.lock:
            self.stopped = True
            self.listener.close()
            for end in self.sockets:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()
