"""The book's public data sets and where they come from: tiny Shakespeare and Multi30k
(task 1), read here, and the files of the pages beyond the chapter (the sentence polarity
data set, the MNIST test digits and Melbourne's daily minimum temperatures), which
seqlib.experiments.datasets reads.

Files live under a data directory (the keys of ``FILES``): ``data_dir``, else
``$SEQLIB_DATA_DIR``, else ``$XDG_CACHE_HOME/seqlib`` (``~/.cache/seqlib``). A missing file
is downloaded from its canonical address, else from a mirror; its sha256 is always checked.

Multi30k: Elliott et al. (2016), "Multi30K: Multilingual English-German Image Descriptions";
Elliott et al. (2017), "Findings of the Second Shared Task on Multimodal Machine Translation"
(French). For educational and non-commercial research use.
Sentence polarity: Pang & Lee (2005), "Seeing stars", ACL (the copy distributed with Kim
(2014)'s code). MNIST: LeCun et al. (1998). Temperatures: Australian Bureau of Meteorology.
"""

import gzip
import hashlib
import http.client
import os
import pathlib
import sys
import tempfile
import urllib.error
import urllib.request
import zlib

from tqdm.auto import tqdm

from seqlib.checks import check_choice

DATA_VARIABLE = "SEQLIB_DATA_DIR"
SPLITS = ("train", "val", "test_2016_flickr")
LANGUAGES = ("en", "fr", "de")

# Each source: its canonical address, then unchanging mirrors (a pinned commit, a bucket).
_SHAKESPEARE_URLS = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
    # jsDelivr's copy of char-rnn at a fixed commit: the same input.txt (1,115,394 bytes).
    "https://cdn.jsdelivr.net/gh/karpathy/char-rnn@6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e"
    "/data/tinyshakespeare/input.txt",
    # TensorFlow's copy, used by its text-generation tutorial: the same 1,115,394 bytes.
    "https://storage.googleapis.com/download.tensorflow.org/data/shakespeare.txt",
)
_MULTI30K_URLS = (
    "https://github.com/multi30k/dataset/raw/master/data/task1/raw/{name}",
    # jsDelivr's copy of the data set's repository at a fixed commit: the same raw files.
    "https://cdn.jsdelivr.net/gh/multi30k/dataset@a3d2e0d26b56f3846f66a952536ffed4e401d05a"
    "/data/task1/raw/{name}",
)
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

_POLARITY_URLS = (
    "https://raw.githubusercontent.com/yoonkim/CNN_sentence/master/{name}",
    # jsDelivr's copy of Kim's repository at the commit that added both files, never changed.
    "https://cdn.jsdelivr.net/gh/yoonkim/CNN_sentence@4abc8df1de694999ff54826854d3ebc53e3e9c20"
    "/{name}",
)
_POLARITY_SHA256 = {
    "rt-polarity.pos": "2da124ec187a9d5a29c9f04e91c540e02baed5af8868f550a26bd6fd4dbf8bf0",
    "rt-polarity.neg": "4ace77d558c3714723843f1d65b60c01e3417b208180f0728808d76ad0eeeaca",
}
_MNIST_URLS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/{name}",
    # The CVDF copy TensorFlow uses; TensorFlow Datasets records these sizes and sha256 sums.
    "https://storage.googleapis.com/cvdf-datasets/mnist/{name}",
)
_MNIST_SHA256 = {
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
_TEMPERATURES_URLS = (
    "https://raw.githubusercontent.com/selva86/datasets/master/daily-min-temperatures.csv",
    # jsDelivr's copy of the repository at the commit that added the file, never changed.
    "https://cdn.jsdelivr.net/gh/selva86/datasets@2c23babe54dcd12ebcf93f31d6605bd8366e91d3"
    "/daily-min-temperatures.csv",
)


def _each(urls: tuple[str, ...], name: str) -> tuple[str, ...]:
    """The addresses of one file of a source."""
    return tuple(url.format(name=name) for url in urls)


# Name under the data directory -> (addresses, a tuple or one str, tried in order; sha256).
FILES: dict[str, tuple[tuple[str, ...], str]] = {
    "tinyshakespeare/input.txt": (
        _SHAKESPEARE_URLS,
        "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
    ),
    **{f"multi30k/{name}": (_each(_MULTI30K_URLS, name), sha)
       for name, sha in _MULTI30K_SHA256.items()},
    **{f"movie-review-polarity/{name}": (_each(_POLARITY_URLS, name), sha)
       for name, sha in _POLARITY_SHA256.items()},
    **{f"mnist/{name}": (_each(_MNIST_URLS, name), sha) for name, sha in _MNIST_SHA256.items()},
    "temperatures/daily-min-temperatures.csv": (
        _TEMPERATURES_URLS,
        "a29a71f38cf548a0b12bee44ceb510919a8cef450e19019261d534208c884fa2",
    ),
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


class _Failed(Exception):
    """One address did not give the file; the message says what went wrong there."""


def _download(name: str, url: str, sha256: str, path: pathlib.Path) -> None:
    """Download ``url`` to ``path`` atomically (verified, then renamed), or raise ``_Failed``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
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
            except urllib.error.HTTPError as err:
                raise _Failed(f"HTTP error {err.code} {err.reason}") from err
            except urllib.error.URLError as err:
                raise _Failed(f"could not connect ({err.reason})") from err
            except (OSError, http.client.HTTPException) as err:
                raise _Failed(f"connection failed ({type(err).__name__}: {err})") from err
            if size is not None and received != size:
                raise _Failed(f"short read: received {received} of {size} bytes")
        actual = digest.hexdigest()
        if actual != sha256:
            raise _Failed(f"checksum mismatch: got sha256 {actual}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _download_first(name: str, urls: tuple[str, ...], sha256: str, path: pathlib.Path) -> str:
    """Download ``name`` from the first of ``urls`` that serves it; return that address."""
    failures = []
    for url in urls:
        try:
            _download(name, url, sha256, path)
        except _Failed as err:
            failures.append((url, str(err)))
            tqdm.write(f"{name}: {url} failed: {err}", file=sys.stderr)
            continue
        tqdm.write(f"{name}: downloaded from {url}", file=sys.stderr)
        return url
    tried = "".join(f"\n  {url}: {reason}" for url, reason in failures)
    every_checksum = all(reason.startswith("checksum mismatch") for _, reason in failures)
    error = ValueError if every_checksum else DownloadError
    raise error(
        f"Could not download {name!r} (expected sha256 {sha256}); "
        f"{'the address' if len(urls) == 1 else f'each of its {len(urls)} addresses'} failed:"
        f"{tried}\nTo place the file by hand, download it from one of these addresses and save "
        f"it as {path}, or set {DATA_VARIABLE} to a folder holding a copy of {name!r} "
        f"(or pass data_dir=...)."
    )


def fetch(name: str, data_dir=None) -> pathlib.Path:
    """Path of a verified local copy of ``name`` (a key of ``FILES``), downloaded if missing;
    ``DownloadError`` (``ValueError`` when every address served other bytes) if it cannot be."""
    if name not in FILES:
        raise ValueError(f"name must be one of {sorted(FILES)}, got {name!r}")
    urls, sha256 = FILES[name]
    urls = (urls,) if isinstance(urls, str) else tuple(urls)
    if not urls:
        raise ValueError(f"FILES[{name!r}] lists no address to download it from")
    path = resolve_data_dir(data_dir) / name
    if not path.exists():
        _download_first(name, urls, sha256, path)
        return path
    actual = _sha256(path)
    if actual != sha256:
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {sha256}, got {actual}. "
            f"The file is corrupt or not the expected version: delete it and retry, "
            f"and it will be downloaded again from {' or '.join(urls)}."
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
        raise ValueError(f"{path} is not a valid gzip file of UTF-8 text ({err}); "
                         "delete it and retry") from err
    lines = text.split("\n")
    if lines[-1] == "":  # the file ends with a newline
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def multi30k(split: str, src: str = "en", tgt: str = "fr", data_dir=None) -> list[tuple[str, str]]:
    """Multi30k task 1 pairs ``(source, target)`` of ``split``, "train" (29,000 pairs), "val"
    (1,014) or "test_2016_flickr" (1,000), in two languages among "en", "fr", "de"."""
    check_choice("split", split, SPLITS)
    check_choice("src", src, LANGUAGES)
    check_choice("tgt", tgt, LANGUAGES)
    if src == tgt:
        others = [lang for lang in LANGUAGES if lang != src]
        raise ValueError(f"src and tgt must differ, got {src!r} for both (tgt one of {others})")
    paths = [fetch(f"multi30k/{split}.{lang}.gz", data_dir) for lang in (src, tgt)]
    sources, targets = (_read_lines(path) for path in paths)
    if len(sources) != len(targets):
        raise ValueError(f"line counts differ: {paths[0]} has {len(sources)} lines, "
                         f"{paths[1]} has {len(targets)}")
    return list(zip(sources, targets, strict=True))
