"""The HTTP helpers against a local stand-in server: the bearer token is
sent, errors carry the service's message, and an empty token file is an
error rather than an unauthenticated request."""

import http.server
import json
import os
import tempfile
import threading
import unittest

import streamkpca
from streamkpca import http as skhttp

TESTDATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "snapshot", "testdata")


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.headers.get("Authorization") != "Bearer s3cret":
            self._send(401, b'{"error":"missing or wrong bearer token"}', "application/json")
            return
        if self.path == "/v1/models/golden/snapshot":
            with open(os.path.join(TESTDATA, "golden.skpca"), "rb") as f:
                self._send(200, f.read(), "application/octet-stream")
        elif self.path == "/v1/models/golden/versions/3/snapshot":
            with open(os.path.join(TESTDATA, "golden_v1.skpca"), "rb") as f:
                self._send(200, f.read(), "application/octet-stream")
        else:
            self._send(404, b'{"error":"no such model"}', "application/json")

    def _send(self, code, body, ctype):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class HTTP(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.url = f"http://127.0.0.1:{cls.srv.server_address[1]}"
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def test_fetch_latest_and_version(self):
        m = streamkpca.fetch(self.url, "golden", token="s3cret")
        self.assertEqual((m.version, m.k, m.snapshot.format_version), (3, 2, 2))
        s = streamkpca.fetch_snapshot(self.url, "golden", version=3, token="s3cret")
        self.assertEqual(s.format_version, 1)

    def test_errors_carry_the_message(self):
        with self.assertRaises(skhttp.APIError) as e:
            streamkpca.fetch(self.url, "golden", token="wrong")
        self.assertEqual(e.exception.status, 401)
        self.assertIn("bearer", e.exception.message)
        with self.assertRaises(skhttp.APIError) as e:
            streamkpca.fetch(self.url, "other", token="s3cret")
        self.assertEqual(e.exception.status, 404)

    def test_follow_errors_carry_the_message(self):
        with self.assertRaises(skhttp.APIError) as e:
            next(streamkpca.follow(self.url, "other", token="s3cret"))
        self.assertEqual((e.exception.status, e.exception.message), (404, "no such model"))

    def test_unreachable_service_is_named(self):
        import socket

        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]  # closed when the block ends: nothing listens
        with self.assertRaisesRegex(ConnectionError, f"127.0.0.1:{port}.*service running"):
            streamkpca.fetch(f"http://127.0.0.1:{port}", "golden", token="s3cret")

    def test_token_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token", delete=False) as f:
            f.write("s3cret\n")
        empty = f.name + ".empty"
        open(empty, "w").close()
        old = os.environ.get("STREAMKPCA_TOKEN_FILE")
        try:
            os.environ["STREAMKPCA_TOKEN_FILE"] = f.name
            self.assertEqual(streamkpca.fetch(self.url, "golden").version, 3)
            os.environ["STREAMKPCA_TOKEN_FILE"] = empty
            with self.assertRaisesRegex(ValueError, "empty"):
                streamkpca.fetch(self.url, "golden")
        finally:
            os.unlink(f.name)
            os.unlink(empty)
            if old is None:
                os.environ.pop("STREAMKPCA_TOKEN_FILE", None)
            else:
                os.environ["STREAMKPCA_TOKEN_FILE"] = old


if __name__ == "__main__":
    unittest.main()
