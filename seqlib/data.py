"""The book's public data sets: tiny Shakespeare, Multi30k (task 1), the sentence polarity
data set, the MNIST test digits and Melbourne's daily minimum temperatures.

Files live under a data directory with the layout ``tinyshakespeare/input.txt``,
``multi30k/{split}.{lang}.gz``, ``movie-review-polarity/rt-polarity.{pos,neg}``,
``mnist/t10k-{images-idx3,labels-idx1}-ubyte.gz`` and
``temperatures/daily-min-temperatures.csv``. The directory is, in order: the ``data_dir``
argument, the environment variable ``SEQLIB_DATA_DIR``, or a per-user cache
(``$XDG_CACHE_HOME/seqlib``, by default ``~/.cache/seqlib``). A file is downloaded from its
canonical address only when it is missing there, and its sha256 is checked every time it is
used.

Multi30k: Elliott et al. (2016), "Multi30K: Multilingual English-German Image Descriptions";
Elliott et al. (2017), "Findings of the Second Shared Task on Multimodal Machine Translation"
(French). For educational and non-commercial research use.
Sentence polarity: Pang & Lee (2005), "Seeing stars", ACL (the copy distributed with Kim
(2014)'s code). MNIST: LeCun et al. (1998). Temperatures: Australian Bureau of Meteorology.
"""

import datetime
import gzip
import hashlib
import http.client
import os
import pathlib
import tempfile
import urllib.request
import zlib

import torch
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

_POLARITY_URL = "https://raw.githubusercontent.com/yoonkim/CNN_sentence/master/{name}"
_POLARITY_SHA256 = {
    "rt-polarity.pos": "2da124ec187a9d5a29c9f04e91c540e02baed5af8868f550a26bd6fd4dbf8bf0",
    "rt-polarity.neg": "4ace77d558c3714723843f1d65b60c01e3417b208180f0728808d76ad0eeeaca",
}
_MNIST_URL = "https://ossci-datasets.s3.amazonaws.com/mnist/{name}"
_MNIST_SHA256 = {
    "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
    "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
}
_TEMPERATURES_URL = (
    "https://raw.githubusercontent.com/selva86/datasets/master/daily-min-temperatures.csv"
)

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
    **{
        f"movie-review-polarity/{name}": (_POLARITY_URL.format(name=name), sha)
        for name, sha in _POLARITY_SHA256.items()
    },
    **{f"mnist/{name}": (_MNIST_URL.format(name=name), sha) for name, sha in _MNIST_SHA256.items()},
    "temperatures/daily-min-temperatures.csv": (
        _TEMPERATURES_URL,
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


def movie_reviews(data_dir=None) -> list[tuple[str, int]]:
    """The sentence polarity data set: ``(sentence, label)`` pairs, label 1 for the 5,331
    positive snippets, then 0 for the 5,331 negative ones, in file order.

    The files are Latin-1 text, one lowercased, tokenised sentence a line. The data set has
    no official split (its usual protocol is 10-fold cross-validation).
    """
    pairs = []
    for label, name in ((1, "pos"), (0, "neg")):
        path = fetch(f"movie-review-polarity/rt-polarity.{name}", data_dir)
        lines = path.read_bytes().decode("latin-1").split("\n")
        pairs += [(line.strip(), label) for line in lines if line.strip()]
    return pairs


def _idx(path: pathlib.Path, dims: int) -> torch.Tensor:
    """An unsigned-byte IDX array (the MNIST format) with ``dims`` dimensions, as uint8."""
    try:
        with gzip.open(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path} is not a valid gzip file ({err}); delete it and retry") from err
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x0800 + dims:
        raise ValueError(
            f"{path}: IDX magic number {magic:#06x}, expected {0x0800 + dims:#06x} "
            f"(unsigned bytes, {dims} dimensions)"
        )
    shape = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    body = raw[4 + 4 * dims:]
    if len(body) != torch.Size(shape).numel():
        raise ValueError(f"{path}: {len(body)} data bytes for shape {shape}")
    return torch.frombuffer(bytearray(body), dtype=torch.uint8).reshape(shape)


def mnist_test(data_dir=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The 10,000 MNIST test digits: images ``(10000, 28, 28)`` uint8 (0 background, 255
    ink) and labels ``(10000,)`` int64 in 0..9."""
    images = _idx(fetch("mnist/t10k-images-idx3-ubyte.gz", data_dir), 3)
    labels = _idx(fetch("mnist/t10k-labels-idx1-ubyte.gz", data_dir), 1)
    if len(images) != len(labels):
        raise ValueError(f"MNIST: {len(images)} images but {len(labels)} labels")
    return images, labels.long()


def daily_min_temperatures(data_dir=None) -> tuple[list[datetime.date], torch.Tensor]:
    """Melbourne's daily minimum temperature (degrees Celsius), 1981-01-01 to 1990-12-31:
    the dates and a float64 tensor of the 3,650 values, in order."""
    path = fetch("temperatures/daily-min-temperatures.csv", data_dir)
    lines = path.read_text(encoding="utf-8").strip().splitlines()
    if lines[0].strip() != "Date,Temp":
        raise ValueError(f"{path}: header {lines[0]!r}, expected 'Date,Temp'")
    dates, values = [], []
    for number, line in enumerate(lines[1:], start=2):
        try:
            day, value = line.split(",")
            dates.append(datetime.date.fromisoformat(day.strip()))
            values.append(float(value))
        except ValueError as err:
            raise ValueError(f"{path}, line {number}: {line!r} is not 'YYYY-MM-DD,value'") from err
    return dates, torch.tensor(values, dtype=torch.float64)
