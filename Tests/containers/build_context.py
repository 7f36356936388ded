#!/usr/bin/env python3
"""The files of the image's build context, as each builder applies .dockerignore to the checkout.

    build_context.py buildah  ENGINE...   Podman's Buildah: a throwaway build COPYs the context and
                                          lists it (the Dockerfile's own base image, no network)
    build_context.py docker               the docker CLI: `docker build` (classic builder, which
                                          packs the context on the client with Docker's own
                                          .dockerignore matcher, as BuildKit's does) against a
                                          stand-in API on a unix socket here that keeps the tar it
                                          is sent and answers the build with an error: no daemon
    build_context.py python               Tests/stack/stack_test.py's matcher (Docker's rules)

Prints the relative paths of the regular files, sorted, one a line. README, "Run the stack in
containers", says why this is compared.
"""

import io
import os
import socket
import socketserver
import subprocess
import sys
import tarfile
import tempfile
import threading
import http.server

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def buildah(engine):
    with tempfile.TemporaryDirectory(prefix="smarthome-context-") as directory:
        containerfile = os.path.join(directory, "Containerfile")
        with open(containerfile, "w", encoding="utf-8") as out:
            # The runtime stage's base: present whenever the bridge image can be built.
            out.write("FROM debian:bookworm-slim\nCOPY . /context/\n"
                      "RUN cd /context && find . -type f | sed 's|^\\./||' | sort\n")
        result = subprocess.run(engine + ["build", "--pull=never", "--layers=false", "--no-cache",
                                          "-f", containerfile, "--iidfile", os.path.join(directory, "iid"), ROOT],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        iid = open(os.path.join(directory, "iid")).read().strip() if os.path.exists(os.path.join(directory, "iid")) else ""
        if iid:
            subprocess.run(engine + ["rmi", "-f", iid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if result.returncode != 0:
            sys.exit(f"buildah listing failed:\n{result.stdout}")
        # RUN's output: every line that names a file of the checkout.
        return sorted({line for line in result.stdout.splitlines() if os.path.isfile(os.path.join(ROOT, line))})


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def docker():
    received = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body=b"", content_type="text/plain"):
            self.send_response(status)
            self.send_header("API-Version", "1.43")
            self.send_header("OSType", "linux")
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_HEAD(self):
            self.answer(200)

        def do_GET(self):
            self.answer(200, b"OK")

        def do_POST(self):
            if "/build" not in self.path:
                self.answer(404, b'{"message":"not here"}', "application/json")
                return
            body = b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    size = int(self.rfile.readline().strip().split(b";")[0], 16)
                    if size == 0:
                        self.rfile.readline()
                        break
                    body += self.rfile.read(size)
                    self.rfile.readline()
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            received["tar"] = body
            self.answer(500, b'{"message":"context received; no daemon here"}', "application/json")

    with tempfile.TemporaryDirectory(prefix="smarthome-docker-api-") as directory:
        path = os.path.join(directory, "docker.sock")
        server = _Server(path, Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        env = dict(os.environ, DOCKER_HOST=f"unix://{path}", DOCKER_BUILDKIT="0",
                   DOCKER_CONFIG=os.path.join(directory, "config"))
        result = subprocess.run(["docker", "build", "-q", ROOT], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=120)
        server.shutdown()
        server.server_close()
    if "tar" not in received:
        sys.exit(f"the docker CLI sent no build context:\n{result.stdout}")
    with tarfile.open(fileobj=io.BytesIO(received["tar"])) as archive:
        return sorted(member.name.removeprefix("./") for member in archive.getmembers() if member.isfile())


def python():
    sys.path.insert(0, os.path.join(ROOT, "Tests", "stack"))
    import stack_test
    patterns = stack_test.dockerignore_patterns()
    files = []
    for directory, folders, names in os.walk(ROOT):
        folders[:] = [f for f in folders if f != ".git"]
        for name in names:
            relative = os.path.relpath(os.path.join(directory, name), ROOT)
            if relative in ("Dockerfile", ".dockerignore"):
                continue  # always sent by both builders, whatever the patterns say
            if not stack_test.dockerignored(relative, patterns):
                files.append(relative)
    return sorted(files)


if __name__ == "__main__":
    kind = sys.argv[1] if len(sys.argv) > 1 else "python"
    files = {"buildah": lambda: buildah(sys.argv[2:] or ["podman"]), "docker": docker, "python": python}[kind]()
    print("\n".join(f for f in files if f not in ("Dockerfile", ".dockerignore")))
