"""S3-compatible storage for the tests: moto in this process (`mock_aws`), or a moto server on loopback.

The storage settings are always the ones config/settings.py makes from the CLAIMLAB_S3_*
environment (read through `settings_under`), so the tests exercise the operator's path.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from tests.support.settings_env import settings_under

BUCKET = "claimlab-test-files"
REGION = "us-east-1"
KEYS = {"CLAIMLAB_S3_ACCESS_KEY_ID": "testing-key", "CLAIMLAB_S3_SECRET_ACCESS_KEY": "testing-secret"}


def s3_environment(*, endpoint_url: str = "", bucket: str = BUCKET) -> dict[str, str]:
    """The variables an operator sets for a bucket (path-style addressing, as for MinIO)."""
    env = {"CLAIMLAB_S3_BUCKET": bucket, "CLAIMLAB_S3_REGION": REGION, "CLAIMLAB_S3_ADDRESSING_STYLE": "path", **KEYS}
    if endpoint_url:
        env["CLAIMLAB_S3_ENDPOINT_URL"] = endpoint_url
    return env


def s3_storages(env: dict[str, str], var_dir: Path) -> dict[str, Any]:
    """STORAGES as config/settings.py makes it under `env`."""
    return settings_under(env, var_dir)["STORAGES"]


def s3_client(endpoint_url: str | None = None) -> Any:
    return boto3.client(
        "s3",
        region_name=REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=KEYS["CLAIMLAB_S3_ACCESS_KEY_ID"],
        aws_secret_access_key=KEYS["CLAIMLAB_S3_SECRET_ACCESS_KEY"],
    )


def keys(client: Any, bucket: str = BUCKET) -> list[str]:
    """Every object name in the bucket."""
    return [entry["Key"] for entry in client.list_objects_v2(Bucket=bucket).get("Contents", [])]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto S3 server on a free loopback port, for processes other than this one; its endpoint URL."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
