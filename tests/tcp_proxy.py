"""A TCP proxy in threads, to stop a server as its clients see it without stopping it.

`Proxy` forwards connections from a local port to the real server (over TCP or a Unix
socket); `Proxy.stop` closes the listening socket and every forwarded connection at once,
as a server that went down (new connections are refused, open ones break). The shared
server itself keeps running for everyone else.
"""

from __future__ import annotations

import socket
import threading

from psycopg.conninfo import conninfo_to_dict


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target`` (``(host, port)`` or a Unix socket's path)
    until `stop`."""

    def __init__(self, target: tuple[str, int] | str) -> None:
        self.target = target
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
            server = self._connect()
            with self.lock:
                if self.stopped:
                    client.close()
                    server.close()
                    return
                self.sockets += [client, server]
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _connect(self) -> socket.socket:
        if isinstance(self.target, tuple):
            return socket.create_connection(self.target)
        server = socket.socket(socket.AF_UNIX)
        server.connect(self.target)
        return server

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
            try:  # (wakes the accept under way: a bare close leaves the port listening)
                self.listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.listener.close()
            for end in self.sockets:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                end.close()


def postgres_proxy(url: str) -> tuple[Proxy, str]:
    """A proxy to the PostgreSQL server of ``url`` and a URL that reaches it through the proxy."""
    params = conninfo_to_dict(url)
    host, port = str(params.get("host") or "localhost"), int(params.get("port") or 5432)
    proxy = Proxy(f"{host}/.s.PGSQL.{port}" if host.startswith("/") else (host, port))
    user = f"{params['user']}@" if params.get("user") else ""
    return proxy, f"postgresql://{user}127.0.0.1:{proxy.port}/{params.get('dbname') or ''}"
