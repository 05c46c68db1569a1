"""A small HTTP server with range support that misbehaves on purpose, for the remote
read tests (crates/tessera/tests/all/remote.rs). Standard library only.

    python3 fault_server.py ROOT      # prints "PORT\n" once listening

GET/HEAD /MODE/NAME serves ROOT/NAME with byte ranges and an ETag, per MODE:
  ok        as a normal server;
  drop      a ranged GET sends the headers and half the body, then closes the socket;
  droponce  as drop for the first ranged GET of each path, then normally;
  flaky     the first 2 ranged GETs of each path answer 500, then normally;
  fail      every GET answers 500 (HEAD works);
  changing  after the first ranged GET the object "changes": a new ETag, and a
            request whose If-Match names the old one gets 412;
  lying     like changing, but ignoring If-Match (the new ETag is in the reply);
  flip      serves the bytes with one bit flipped at the offset written (in decimal)
            in the file ROOT/NAME.flip;
  short     a ranged GET declares the full length but sends 10 bytes fewer, then closes;
  slow      as ok, each ranged GET answered after 1.5 s;
  signed    as ok when the query string holds X-Amz-Signature=good (a presigned-style
            URL) and the method is GET, else 403: as S3 answers a HEAD with a URL
            presigned for GET (the signature covers the method);
  norange   ignores Range: every GET answers 200 with the whole object (as some
            simple servers and proxies do).
Counts per path are kept in memory.
"""
import http.server
import os
import re
import socketserver
import sys
import threading
import time

ROOT = sys.argv[1]
COUNTS = {}
LOCK = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _target(self):
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        if len(parts) != 2:
            return None, None
        mode, name = parts
        path = os.path.join(ROOT, name)
        if ".." in name or not os.path.isfile(path):
            return mode, None
        return mode, path

    def _count(self):
        with LOCK:
            n = COUNTS.get(self.path, 0)
            COUNTS[self.path] = n + 1
            return n

    def _etag(self, mode, path, generation):
        st = os.stat(path)
        return f'"{st.st_size:x}-{int(st.st_mtime):x}-{generation}"'

    def do_HEAD(self):
        self._serve(head=True)

    def do_GET(self):
        self._serve(head=False)

    def _serve(self, head):
        mode, path = self._target()
        if path is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        with open(path, "rb") as f:
            data = bytearray(f.read())
        size = len(data)
        rng = self.headers.get("Range")
        if mode == "norange":
            rng = None
        n = 0 if head or not rng else self._count()
        generation = 0
        if mode in ("changing", "lying") and n >= 1:
            generation = 1
            data = bytearray(b ^ 0x55 for b in data)
        etag = self._etag(mode, path, generation)
        if mode == "flip":
            with open(path + ".flip") as f:
                at = int(f.read().strip())
            data[at] ^= 0x01
        if mode == "signed" and (head or "X-Amz-Signature=good" not in self.path.partition("?")[2]):
            body = b"signature required"
            self.send_response(403)
            self.send_header("Content-Length", "0" if head else str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        if mode == "slow" and rng and not head:
            time.sleep(1.5)
        if not head and mode == "fail" or (mode == "flaky" and rng and n < 2):
            body = b"injected failure"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        im = self.headers.get("If-Match")
        if mode == "changing" and im is not None and im != etag:
            self.send_response(412)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start, end = 0, size - 1
        status = 200
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if not m:
                self.send_response(416)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            start = int(m.group(1))
            end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
            status = 206
        body = bytes(data[start : end + 1])
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if head:
            return
        if (mode == "drop" or (mode == "droponce" and n == 0)) and rng:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if mode == "short" and rng:
            self.wfile.write(body[: max(0, len(body) - 10)])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)
            return
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
