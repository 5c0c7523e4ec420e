"""A webhook receiver for scripts/bench-signal.sh: answers 200 and appends
"<X-Cairn-Notification-Id> <unix time, float>" to the file given, one line
per request. Listens on 127.0.0.1 on the port given (0: any), and writes the
port it got to <file>.port."""

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUT = sys.argv[1]
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 0


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        now = time.time()
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        ident = self.headers.get("x-cairn-notification-id", "-")
        with open(OUT, "a", encoding="utf-8") as f:
            f.write(f"{ident} {now:.6f}\n")
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
with open(OUT + ".port", "w", encoding="utf-8") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
