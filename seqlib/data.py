"""The book's two public data sets: tiny Shakespeare and Multi30k (task 1).

Files live under a data directory with the layout ``tinyshakespeare/input.txt`` and
``multi30k/{split}.{lang}.gz``. The directory is, in order: the ``data_dir`` argument, the
environment variable ``SEQLIB_DATA_DIR``, or a per-user cache (``$XDG_CACHE_HOME/seqlib``,
by default ``~/.cache/seqlib``). A file is downloaded from its canonical address only when
it is missing there, and its sha256 is checked every time it is used.

Multi30k: Elliott et al. (2016), "Multi30K: Multilingual English-German Image Descriptions";
Elliott et al. (2017), "Findings of the Second Shared Task on Multimodal Machine Translation"
(French). For educational and non-commercial research use.
"""

import gzip
import hashlib
import http.client
import os
import pathlib
import tempfile
import urllib.request
import zlib

from tqdm.auto import tqdm

DATA_VARIABLE = "SEQLIB_DATA_DIR"
SPLITS = ("train", "val", "test_2016_flickr")
LANGUAGES = ("en", "fr", "de")

_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
_MULTI30K_URL = "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}"
_MULTI30K_SHA256 = {
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "train.fr.gz": "622e75069e9f4c577425c4f277116ce66e63a2401c0a2312d90073cb12379a3c",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
    "val.fr.gz": "ca3106f1a72390591d25f6c45cb4cd39dec4cd3f123e099748a3ce5256c160e9",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "test_2016_flickr.fr.gz": "6d326e188d259fb1d04ac19eae3af956559b3a0b93d7635e56c90987c40c8b90",
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
}

# Relative name under the data directory -> (canonical URL, sha256 of the file).
FILES: dict[str, tuple[str, str]] = {
    "tinyshakespeare/input.txt": (
        _SHAKESPEARE_URL,
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    ),
    **{
        f"multi30k/{name}": (_MULTI30K_URL.format(name=name), sha)
        for name, sha in _MULTI30K_SHA256.items()
    },
}

_BLOCK = 1 << 16  # bytes read at a time when hashing or downloading


class DownloadError(ConnectionError):
    """A data file is missing locally and could not be downloaded."""


def resolve_data_dir(data_dir=None) -> pathlib.Path:
    """The data directory: ``data_dir``, else ``$SEQLIB_DATA_DIR``, else the user cache."""
    if data_dir is not None:
        if not isinstance(data_dir, str | os.PathLike):
            raise TypeError(f"data_dir must be a str or path, got {type(data_dir).__name__}")
        return pathlib.Path(data_dir).expanduser()
    if os.environ.get(DATA_VARIABLE):
        return pathlib.Path(os.environ[DATA_VARIABLE]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(cache).expanduser() / "seqlib"


def _sha256(path: pathlib.Path) -> str:
    """sha256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _download(name: str, url: str, sha256: str, path: pathlib.Path) -> None:
    """Download ``url`` to ``path`` atomically: a temporary file, verified, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    hint = (
        f"Could not download {name!r} from {url}. To work offline, set {DATA_VARIABLE} to a "
        f"folder holding a copy of {name!r} (or pass data_dir=...)."
    )
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    size = response.headers.get("Content-Length")
                    size = int(size) if size is not None else None
                    received = 0
                    with tqdm(total=size, unit="B", unit_scale=True, desc=name, leave=False) as bar:
                        while block := response.read(_BLOCK):
                            out.write(block)
                            digest.update(block)
                            received += len(block)
                            bar.update(len(block))
            except (OSError, http.client.HTTPException) as err:  # URLError is an OSError
                raise DownloadError(f"{hint} Reason: {err}") from err
            if size is not None and received != size:
                raise DownloadError(f"{hint} Reason: received {received} of {size} bytes.")
        actual = digest.hexdigest()
        if actual != sha256:
            raise ValueError(
                f"checksum mismatch for {name!r} downloaded from {url}: expected sha256 "
                f"{sha256}, got {actual}; the download was discarded."
            )
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def fetch(name: str, data_dir=None) -> pathlib.Path:
    """Path of a verified local copy of ``name`` (a key of ``FILES``), downloading if missing."""
    if name not in FILES:
        raise ValueError(f"name must be one of {sorted(FILES)}, got {name!r}")
    url, sha256 = FILES[name]
    path = resolve_data_dir(data_dir) / name
    if not path.exists():
        _download(name, url, sha256, path)
        return path
    actual = _sha256(path)
    if actual != sha256:
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {sha256}, got {actual}. "
            f"The file is corrupt or not the expected version: delete it and retry, "
            f"and it will be downloaded again from {url}."
        )
    return path


def tiny_shakespeare(data_dir=None) -> str:
    """The tiny Shakespeare corpus as one string (1,115,394 characters)."""
    return fetch("tinyshakespeare/input.txt", data_dir).read_bytes().decode("utf-8")


def _read_lines(path: pathlib.Path) -> list[str]:
    """Lines of a gzipped UTF-8 text file, each without its line ending."""
    try:
        with gzip.open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as err:
        raise ValueError(
            f"{path} is not a valid gzip file of UTF-8 text ({err}); delete it and retry"
        ) from err
    lines = text.split("\n")
    if lines[-1] == "":  # the file ends with a newline
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _check_choice(argument: str, value, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{argument} must be one of {list(allowed)}, got {value!r}")


def multi30k(split: str, src: str = "en", tgt: str = "fr", data_dir=None) -> list[tuple[str, str]]:
    """Multi30k task 1 sentence pairs ``(source, target)`` for one split.

    ``split`` is ``"train"`` (29,000 pairs), ``"val"`` (1,014) or ``"test_2016_flickr"``
    (1,000); ``src`` and ``tgt`` are two different languages among ``"en"``, ``"fr"``,
    ``"de"``. Line i of one language translates line i of the other.
    """
    _check_choice("split", split, SPLITS)
    _check_choice("src", src, LANGUAGES)
    _check_choice("tgt", tgt, LANGUAGES)
    if src == tgt:
        others = [lang for lang in LANGUAGES if lang != src]
        raise ValueError(f"src and tgt must differ, got {src!r} for both (tgt one of {others})")
    paths = [fetch(f"multi30k/{split}.{lang}.gz", data_dir) for lang in (src, tgt)]
    sources, targets = (_read_lines(path) for path in paths)
    if len(sources) != len(targets):
        raise ValueError(
            f"line counts differ: {paths[0]} has {len(sources)} lines, "
            f"{paths[1]} has {len(targets)}"
        )
    return list(zip(sources, targets, strict=True))
