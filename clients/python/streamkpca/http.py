"""Fetching models from a running streamkpca service over its HTTP API
(serve/openapi.yaml): the latest version or a given one, with the bearer
token when the service has one. Standard library only."""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from .snapshot import Model, loads


class APIError(RuntimeError):
    """The service answered with an error (status and its message)."""

    def __init__(self, status, message, url):
        super().__init__(f"{url}: HTTP {status}: {message}")
        self.status = status
        self.message = message


def _token(token):
    if token is not None:
        return token
    path = os.environ.get("STREAMKPCA_TOKEN_FILE")
    if path:
        with open(path) as f:
            t = f.read().strip()
        if not t:
            raise ValueError(f"STREAMKPCA_TOKEN_FILE {path} is empty")
        return t
    return os.environ.get("STREAMKPCA_TOKEN") or None


def _request(url, token=None, body=None, timeout=30):
    headers = {}
    tok = _token(token)
    if tok:
        headers["Authorization"] = "Bearer " + tok
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        raise APIError(e.code, _message(e.read()), url) from None
    except urllib.error.URLError as e:
        raise ConnectionError(f"{url}: {e.reason} (is the service running, and is this its HTTP address?)") from None


def _message(raw):
    """The service's error message: the "error" of its JSON body, else the
    body as text."""
    try:
        j = json.loads(raw)
        if isinstance(j, dict) and "error" in j:
            return str(j["error"])
    except ValueError:
        pass
    return raw.decode("utf-8", "replace")


def _model_url(base, model):
    return base.rstrip("/") + "/v1/models/" + urllib.parse.quote(model, safe="")


def list_models(base, token=None, timeout=30):
    """The models a service serves (GET /v1/models)."""
    return json.loads(_request(base.rstrip("/") + "/v1/models", token, timeout=timeout))


def fetch_snapshot(base, model, version=None, token=None, timeout=30):
    """The snapshot of a model: the version served now (version=None), or
    the given version from the service's history. base is the service's
    HTTP address, e.g. "http://localhost:8080"; token defaults to the file
    named by STREAMKPCA_TOKEN_FILE, else STREAMKPCA_TOKEN."""
    url = _model_url(base, model)
    url += "/snapshot" if version is None else f"/versions/{int(version)}/snapshot"
    return loads(_request(url, token, timeout=timeout))


def fetch(base, model, version=None, token=None, exact=True, timeout=30):
    """A Model for the snapshot fetch_snapshot returns."""
    return Model(fetch_snapshot(base, model, version, token, timeout), exact=exact)


def project_remote(base, model, vectors, view="x", version=None, token=None, timeout=30):
    """Projections computed by the service itself (POST .../project): a
    check on a local Model, or a client without numpy work."""
    url = _model_url(base, model)
    url += "/project" if version is None else f"/versions/{int(version)}/project"
    body = {"vectors": [list(map(float, v)) for v in vectors]}
    if view != "x":
        body["view"] = view
    return json.loads(_request(url, token, body, timeout=timeout))


def score_remote(base, model, vectors, version=None, token=None, timeout=30):
    """Scores computed by the service itself (POST .../score): projections,
    residuals and, when the version has a novelty reference, novelty —
    the numbers of the output topic's records for that version."""
    url = _model_url(base, model)
    url += "/score" if version is None else f"/versions/{int(version)}/score"
    body = {"vectors": [list(map(float, v)) for v in vectors]}
    return json.loads(_request(url, token, body, timeout=timeout))


def follow(base, model, interval=5.0, token=None, exact=True, timeout=30, stop=None):
    """Yields a Model for the version the service serves now, then again
    each time that changes (a newer version, a pin, an unpin, a model
    restarted in a new incarnation, whose versions start again low): it
    polls GET .../snapshot every interval seconds with If-None-Match, so
    an unchanged version costs a 304 and no download. A service that is
    down or restarting is retried after interval; an answer it cannot use
    (a corrupt snapshot) is skipped the same way, with no model yielded.
    A model the service does not serve (404) or a refused token (401,
    403) raises APIError at once.
    stop, if given (a threading.Event), ends the generator when set.

        for model in streamkpca.follow("http://localhost:8080", "hermite"):
            print(model.version, model.transform(x))
    """
    url = _model_url(base, model) + "/snapshot"
    etag = None
    while stop is None or not stop.is_set():
        headers = {}
        tok = _token(token)
        if tok:
            headers["Authorization"] = "Bearer " + tok
        if etag:
            headers["If-None-Match"] = etag
        req = urllib.request.Request(url, headers=headers)
        new = None
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                tag, data = r.headers.get("ETag"), r.read()
            new = Model(loads(data), exact=exact)
            etag = tag
        except urllib.error.HTTPError as e:
            if e.code in (401, 403, 404):
                # A token refused, or a model the service does not serve
                # (a misspelt name): polling would never succeed.
                raise APIError(e.code, _message(e.read()), url) from None
            # 304: unchanged; 503: no version yet; other errors: retried
        except (urllib.error.URLError, OSError, ValueError):
            pass  # down, restarting, or an answer that is not a model: retried
        if new is not None:
            yield new
        if stop is not None:
            if stop.wait(interval):
                return
        else:
            time.sleep(interval)
