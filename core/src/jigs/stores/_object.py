"""The object storage store (S3, GCS, Azure, a local directory, memory) through ``obstore``.

``obstore`` (Rust ``object_store`` bindings, Apache Arrow project) was chosen over ``fsspec``:
one wheel speaks S3, GCS and Azure (fsspec needs s3fs/gcsfs/adlfs, each with its own heavy
dependency tree such as aiobotocore), a put is one whole-object PUT (atomic on every backend;
the local backend writes a temporary file and renames it), and credentials come from the
provider's usual environment variables or the ``options`` table. It is imported only when a
store is used: ``pip install 'jigs-core[object-store]'``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jigs.errors import SessionStoreError
from jigs.stores._protocol import ArtifactInfo, check_key, sha256_hex

__all__ = ["ObjectStore"]


class ObjectStore:
    """Artifacts as objects under ``url`` (``s3://bucket/prefix``, ``gs://…``, ``az://…``,
    ``file:///dir``, ``memory://``), or under a ready ``obstore`` store object."""

    name = "object"

    def __init__(
        self, url: str | None = None, *, store: Any = None, options: Mapping[str, Any] = {}
    ) -> None:
        try:
            import obstore.store
        except ImportError:
            raise SessionStoreError(
                "the object storage session store needs obstore; pip install "
                "'jigs-core[object-store]'",
                store="object",
                operation="configure",
            ) from None
        if store is None:
            if not url:
                raise SessionStoreError(
                    "the object storage session store needs a url (s3://bucket/prefix, ...)",
                    store="object",
                    operation="configure",
                )
            extra = dict(options)
            if url.startswith("file://"):
                extra.setdefault("mkdir", True)
            try:
                store = obstore.store.from_url(url, **extra)
            except Exception as exc:
                raise SessionStoreError(
                    f"cannot open the object store {url.split('?')[0][:120]} "
                    f"({type(exc).__name__}); check session_store.url and options",
                    store="object",
                    operation="configure",
                ) from None
        self._store = store
        # never keep credentials a URL may carry (user:password@host, ?token=...)
        self._where = re.sub(r"//[^/@]*@", "//", (url or type(store).__name__).split("?")[0])

    def describe(self) -> str:
        return f"object:{self._where}"

    def _fail(self, operation: str, exc: Exception) -> Exception:
        return SessionStoreError(
            f"the object store {self._where} failed to {operation} ({type(exc).__name__}); "
            f"check the bucket, the credentials and the network",
            store=self.describe(),
            operation=operation,
            retryable=True,
        )

    def put(self, key: str, data: bytes) -> ArtifactInfo:
        import obstore

        check_key(key)
        try:
            obstore.put(self._store, key, data)
            meta = obstore.head(self._store, key)
        except Exception as exc:
            raise self._fail("put", exc) from None
        return ArtifactInfo(key, len(data), sha256_hex(data), meta["last_modified"].timestamp())

    def get(self, key: str) -> bytes | None:
        import obstore

        check_key(key)
        try:
            return bytes(obstore.get(self._store, key).bytes())
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise self._fail("get", exc) from None

    def exists(self, key: str) -> bool:
        import obstore

        check_key(key)
        try:
            obstore.head(self._store, key)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._fail("head", exc) from None
        return True

    def delete(self, key: str) -> bool:
        import obstore

        if not self.exists(key):
            return False
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._fail("delete", exc) from None
        return True

    def list(self, prefix: str = "") -> list[ArtifactInfo]:
        import obstore

        check_key(prefix, prefix=True)
        found: list[ArtifactInfo] = []
        try:
            for batch in obstore.list(self._store, prefix=prefix or None):
                for meta in batch:
                    key = str(meta["path"])
                    if key.startswith(prefix):
                        found.append(
                            ArtifactInfo(
                                key, int(meta["size"]), None, meta["last_modified"].timestamp()
                            )
                        )
        except Exception as exc:
            raise self._fail("list", exc) from None
        return sorted(found, key=lambda a: a.key)
