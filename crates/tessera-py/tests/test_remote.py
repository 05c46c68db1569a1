"""tessera.open / safe_open / load_file on http:// and s3:// locations, against the
nginx and moto servers scripts/remote-servers.sh starts (scripts/test.sh exports their
addresses). Without them the tests skip with a notice, or fail under
TESSERA_REQUIRE_REMOTE=1."""
from __future__ import annotations

import os

import numpy as np
import pytest
import safetensors.numpy

import tessera
import tessera.numpy

HTTP_URL = os.environ.get("TESSERA_TEST_HTTP_URL")
HTTP_ROOT = os.environ.get("TESSERA_TEST_HTTP_ROOT")
S3_ENDPOINT = os.environ.get("TESSERA_TEST_S3_ENDPOINT")
BUCKET = os.environ.get("TESSERA_TEST_S3_BUCKET")


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


def test_missing_remote_file_is_an_error_naming_the_url(servers):
    url = f"{HTTP_URL}/no-such-file.safetensors"
    with pytest.raises(Exception) as e:
        tessera.open(url)
    assert url in str(e.value)
