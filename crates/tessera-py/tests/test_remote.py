"""tessera.open / safe_open / load_file on http:// and s3:// locations, against the
nginx and moto servers scripts/remote-servers.sh starts (scripts/test.sh exports their
addresses). Without them the tests skip with a notice, or fail under
TESSERA_REQUIRE_REMOTE=1."""
from __future__ import annotations

import json
import os
import uuid

import numpy as np
import pytest
import safetensors.numpy

import tessera
import tessera.numpy

HTTP_URL = os.environ.get("TESSERA_TEST_HTTP_URL")
HTTP_ROOT = os.environ.get("TESSERA_TEST_HTTP_ROOT")
S3_ENDPOINT = os.environ.get("TESSERA_TEST_S3_ENDPOINT")
BUCKET = os.environ.get("TESSERA_TEST_S3_BUCKET")


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    # Each test has a disk cache of its own (empty): no test reads what another fetched,
    # and none writes into the user's ~/.cache.
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "tessera-cache"))


@pytest.fixture
def servers():
    if not (HTTP_URL and HTTP_ROOT and S3_ENDPOINT and BUCKET):
        msg = "no test servers (TESSERA_TEST_HTTP_URL, TESSERA_TEST_S3_ENDPOINT); scripts/test.sh starts them"
        if os.environ.get("TESSERA_REQUIRE_REMOTE") == "1":
            pytest.fail("TESSERA_REQUIRE_REMOTE=1: " + msg)
        print("notice: remote tests skipped: " + msg)
        pytest.skip(msg)


def _tensors():
    rng = np.random.default_rng(7)
    return {f"layer.{i}.weight": rng.standard_normal((64, 256)).astype(np.float32) for i in range(8)}


def test_open_http_fetches_one_tensor(servers, tmp_path):
    want = _tensors()
    # Written by the safetensors package (not by tessera).
    name = "py-remote.safetensors"
    safetensors.numpy.save_file(want, os.path.join(HTTP_ROOT, name))
    f = tessera.open(f"{HTTP_URL}/{name}")
    assert sorted(f.keys()) == sorted(want)
    np.testing.assert_array_equal(np.asarray(f["layer.3.weight"]), want["layer.3.weight"])
    got = tessera.numpy.load_file(f"{HTTP_URL}/{name}")
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)
    with tessera.safe_open(f"{HTTP_URL}/{name}", framework="np") as s:
        np.testing.assert_array_equal(s.get_tensor("layer.5.weight"), want["layer.5.weight"])


def test_open_s3(servers, tmp_path, monkeypatch):
    import boto3  # installed with moto

    want = _tensors()
    local = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(local))
    s3 = boto3.client("s3", endpoint_url=S3_ENDPOINT, region_name="us-east-1")
    s3.upload_file(str(local), BUCKET, "py/m.safetensors")
    monkeypatch.setenv("AWS_ENDPOINT_URL", S3_ENDPOINT)
    f = tessera.open(f"s3://{BUCKET}/py/m.safetensors")
    np.testing.assert_array_equal(np.asarray(f["layer.0.weight"]), want["layer.0.weight"])
    assert f.verify().ok


def test_missing_remote_file_is_a_filenotfounderror_naming_the_url(servers, monkeypatch):
    # Issue 30 §5: a missing object is a FileNotFoundError (it was a KeyError).
    monkeypatch.setenv("AWS_ENDPOINT_URL", S3_ENDPOINT)
    for url in (f"{HTTP_URL}/no-such-file.safetensors", f"s3://{BUCKET}/py/no-such-object.safetensors"):
        for call in (tessera.open, tessera.numpy.load_file):
            with pytest.raises(FileNotFoundError) as e:
                call(url)
            assert isinstance(e.value, tessera.TesseraError) and not isinstance(e.value, KeyError)
            assert url in str(e.value)


def _presigner():
    import boto3  # installed with moto
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=S3_ENDPOINT, region_name="us-east-1", config=Config(signature_version="s3v4")
    )


def test_presigned_url_reads_one_tensor(servers, tmp_path):
    want = _tensors()
    local = tmp_path / "p.safetensors"
    # Written by the safetensors package; the URL signed by boto3 (SigV4 query string).
    safetensors.numpy.save_file(want, str(local))
    s3 = _presigner()
    s3.upload_file(str(local), BUCKET, "py/presigned/p.safetensors")
    url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": BUCKET, "Key": "py/presigned/p.safetensors"}, ExpiresIn=600
    )
    assert url.startswith("http://") and "X-Amz-Signature=" in url, url
    f = tessera.open(url)
    assert sorted(f.keys()) == sorted(want)
    np.testing.assert_array_equal(np.asarray(f["layer.3.weight"]), want["layer.3.weight"])
    with pytest.raises(Exception) as e:
        f["no.such.tensor"]
    signature = url.split("X-Amz-Signature=")[1].split("&")[0]
    assert signature not in str(e.value)


def _upload_hf_set(s3, tmp_path, prefix):
    """Two safetensors shards (written by safetensors) and their index under prefix/."""
    want = _tensors()
    names = sorted(want)
    shards = {
        "model-00001-of-00002.safetensors": {k: want[k] for k in names[:4]},
        "model-00002-of-00002.safetensors": {k: want[k] for k in names[4:]},
    }
    weight_map = {}
    for shard, tensors in shards.items():
        safetensors.numpy.save_file(tensors, str(tmp_path / shard))
        s3.upload_file(str(tmp_path / shard), BUCKET, f"{prefix}/{shard}")
        weight_map.update({k: shard for k in tensors})
    index = json.dumps({"metadata": {"total_size": sum(v.nbytes for v in want.values())}, "weight_map": weight_map})
    s3.put_object(Bucket=BUCKET, Key=f"{prefix}/model.safetensors.index.json", Body=index.encode())
    return want, names


def test_presigned_shard_url_opens_the_shard_and_a_presigned_index_is_refused(servers, tmp_path, monkeypatch):
    s3 = _presigner()
    want, names = _upload_hf_set(s3, tmp_path, "py/presigned-set")

    def signed(key):
        return s3.generate_presigned_url(
            "get_object", Params={"Bucket": BUCKET, "Key": f"py/presigned-set/{key}"}, ExpiresIn=600
        )

    # A shard's signature cannot fetch the index or the other shard: the shard alone.
    f = tessera.open(signed("model-00002-of-00002.safetensors"))
    assert sorted(f.keys()) == names[4:]
    np.testing.assert_array_equal(np.asarray(f[names[5]]), want[names[5]])
    # The index's signature cannot fetch the shards: refused, saying why.
    url = signed("model.safetensors.index.json")
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.open(url)
    assert "presigned" in str(e.value)
    assert url.split("X-Amz-Signature=")[1].split("&")[0] not in str(e.value)
    # Unsigned, with credentials, the same shard's URL opens the set.
    monkeypatch.setenv("AWS_ENDPOINT_URL", S3_ENDPOINT)
    g = tessera.open(f"s3://{BUCKET}/py/presigned-set/model-00002-of-00002.safetensors")
    assert sorted(g.keys()) == names


def test_a_directory_url_opens_the_set_in_it(servers, tmp_path, monkeypatch):
    s3 = _presigner()
    want, names = _upload_hf_set(s3, tmp_path, "py/dir-set")
    monkeypatch.setenv("AWS_ENDPOINT_URL", S3_ENDPOINT)
    for url in (f"s3://{BUCKET}/py/dir-set/", f"s3://{BUCKET}/py/dir-set"):
        f = tessera.open(url)
        assert sorted(f.keys()) == names, url
        np.testing.assert_array_equal(np.asarray(f[names[1]]), want[names[1]])
    with pytest.raises(FileNotFoundError) as e:
        tessera.open(f"s3://{BUCKET}/py/no-such-dir/")
    assert "no model" in str(e.value)


def test_save_and_convert_to_s3_upload_what_the_local_write_writes(servers, tmp_path, monkeypatch):
    import boto3  # installed with moto

    monkeypatch.setenv("AWS_ENDPOINT_URL", S3_ENDPOINT)
    s3 = boto3.client("s3", endpoint_url=S3_ENDPOINT, region_name="us-east-1")
    want = _tensors()
    # A prefix of this run's own: the server may hold an earlier run's objects.
    prefix = f"py-save-{uuid.uuid4().hex}"
    url = f"s3://{BUCKET}/{prefix}/m.safetensors"
    tessera.numpy.save_file(want, url)
    body = s3.get_object(Bucket=BUCKET, Key=f"{prefix}/m.safetensors")["Body"].read()
    # Read back by the safetensors package, not by tessera.
    got = safetensors.numpy.load(body)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], v)
    # File.convert to a key, and a format with a side file (streamed WTXT's .wsum): both objects
    # are there, the side file named in the report as its URL.
    local = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(local))
    report = tessera.open(str(local)).convert(f"s3://{BUCKET}/{prefix}/m.zt")
    assert report is not None
    zt = tessera.open(f"s3://{BUCKET}/{prefix}/m.zt")
    np.testing.assert_array_equal(np.asarray(zt["layer.2.weight"]), want["layer.2.weight"])
    report = tessera.open(str(local)).convert(f"s3://{BUCKET}/{prefix}/m.wtxt", streaming=True)
    keys = {o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{prefix}/")["Contents"]}
    assert {f"{prefix}/m.wtxt", f"{prefix}/m.wtxt.wsum"} <= keys, keys
    assert f"s3://{BUCKET}/{prefix}/m.wtxt.wsum" in [str(p) for p in report.extra_files]
    # An HTTP server takes no uploads: refused, naming the URL, nothing written locally.
    with pytest.raises(tessera.UnsupportedError) as e:
        tessera.numpy.save_file(want, f"{HTTP_URL}/py-save.safetensors")
    assert "s3://" in str(e.value)


def _token_server(path, token):
    """A ranged HTTP server on 127.0.0.1 serving `path` only to `Authorization: Bearer
    <token>` (401 otherwise), recording the Authorization headers it saw."""
    import http.server
    import threading

    data = open(path, "rb").read()
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _allowed(self):
            seen.append(self.headers.get("Authorization"))
            if self.headers.get("Authorization") == f"Bearer {token}":
                return True
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False

        def _head(self, status, length):
            self.send_response(status)
            self.send_header("Content-Length", str(length))
            self.send_header("ETag", '"v1"')
            self.send_header("Last-Modified", "Fri, 27 Nov 2026 00:00:00 GMT")
            self.send_header("Accept-Ranges", "bytes")

        def do_HEAD(self):
            if self._allowed():
                self._head(200, len(data))
                self.end_headers()

        def do_GET(self):
            if not self._allowed():
                return
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes="):
                a, b = rng[len("bytes="):].split("-")
                a = int(a)
                b = min(int(b) if b else len(data) - 1, len(data) - 1)
                self._head(206, b - a + 1)
                self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
                self.end_headers()
                self.wfile.write(data[a : b + 1])
            else:
                self._head(200, len(data))
                self.end_headers()
                self.wfile.write(data)

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


def test_token_keyword_sends_a_bearer_token_and_never_shows_it(tmp_path, monkeypatch):
    for var in ("TESSERA_HTTP_TOKEN", "TESSERA_HTTP_TOKEN_HOSTS", "HF_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    want = _tensors()
    local = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(want, str(local))
    secret = "tok-" + uuid.uuid4().hex
    srv, seen = _token_server(local, secret)
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/m.safetensors"
        # Without the token, and with a wrong one: refused, the token never in the message.
        with pytest.raises(tessera.TesseraError) as e:
            tessera.open(url)
        assert "401" in str(e.value), str(e.value)
        with pytest.raises(tessera.TesseraError) as e:
            tessera.open(url, token="wrong-" + secret)
        assert secret not in str(e.value) and secret not in repr(e.value)
        # With it: every way that takes a URL reads.
        f = tessera.open(url, token=secret)
        np.testing.assert_array_equal(np.asarray(f["layer.3.weight"]), want["layer.3.weight"])
        assert secret not in repr(f)
        got = tessera.numpy.load_file(url, token=secret)
        np.testing.assert_array_equal(got["layer.1.weight"], want["layer.1.weight"])
        with tessera.safe_open(url, framework="np", token=secret) as s:
            np.testing.assert_array_equal(s.get_tensor("layer.5.weight"), want["layer.5.weight"])
        assert f"Bearer {secret}" in seen
        # token=True sends TESSERA_HTTP_TOKEN to this host (the CLI's --token).
        monkeypatch.setenv("TESSERA_HTTP_TOKEN", secret)
        with pytest.raises(tessera.TesseraError):
            tessera.open(url)
        assert sorted(tessera.open(url, token=True).keys()) == sorted(want)
        with pytest.raises(TypeError):
            tessera.open(url, token=b"bytes")
    finally:
        srv.shutdown()


def _http_log(name):
    """nginx's requests for ``/name`` so far, as ``(method, body bytes)``, once settled."""
    import time

    def read():
        try:
            with open(os.environ["TESSERA_TEST_HTTP_LOG"]) as f:
                lines = [l.split(" ") for l in f.read().splitlines()]
        except FileNotFoundError:
            return []
        return [(l[0], int(l[-1]) if l[-1].isdigit() else 0) for l in lines if len(l) > 1 and l[1] == "/" + name]

    last = read()
    for _ in range(10):
        time.sleep(0.03)
        now = read()
        if now == last:
            break
        last = now
    return last


def _files(root):
    return [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs]


def test_a_second_open_of_a_url_fetches_no_bytes_and_cache_false_writes_nothing(servers, tmp_path, monkeypatch):
    want = _tensors()
    name = "py-cached.safetensors"
    # Written by the safetensors package (not by tessera).
    safetensors.numpy.save_file(want, os.path.join(HTTP_ROOT, name))
    url = f"{HTTP_URL}/{name}"

    def every_way(**kw):
        got = tessera.numpy.load_file(url, **kw)
        for k, v in want.items():
            np.testing.assert_array_equal(got[k], v)
        with tessera.safe_open(url, framework="np", **kw) as s:
            np.testing.assert_array_equal(s.get_tensor("layer.2.weight"), want["layer.2.weight"])
        f = tessera.open(url, **kw)
        np.testing.assert_array_equal(np.asarray(f["layer.6.weight"]), want["layer.6.weight"])
        assert f.verify().ok

    off = tmp_path / "off"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(off))
    for _ in range(2):
        before = len(_http_log(name))
        every_way(cache=False)
        assert sum(b for _, b in _http_log(name)[before:]) > 0
    assert not off.exists() and _files(off) == []

    on = tmp_path / "on"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(on))
    before = len(_http_log(name))
    every_way()
    assert sum(b for _, b in _http_log(name)[before:]) > 0
    before = len(_http_log(name))
    every_way()
    warm = _http_log(name)[before:]
    # One HEAD per open (the object's current ETag), no object bytes.
    assert warm and all(m == "HEAD" and b == 0 for m, b in warm), warm
    entries = _files(on)
    assert entries and not any(os.path.basename(p).startswith(".tmp") for p in entries)
