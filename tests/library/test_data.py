"""Tests of seqlib.data: the loader logic on small files served from a local HTTP server,
then the real data sets when SEQLIB_DATA_DIR points at a copy of them."""

import datetime
import functools
import gzip
import hashlib
import http.server
import os
import pathlib
import re
import socket
import subprocess
import sys
import threading
import urllib.parse

import pytest
import torch

from seqlib import data
from seqlib.experiments import datasets

SHAKESPEARE = "tinyshakespeare/input.txt"
TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
# A small Multi30k: the last French line has no final newline, and a line keeps its spaces.
SENTENCES = {
    "en": "Two dogs play.\n A man  runs. \nA red car.\n",
    "fr": "Deux chiens jouent.\n Un homme  court. \nUne voiture rouge.",
    "de": "Zwei Hunde spielen.\n Ein Mann  läuft. \nEin rotes Auto.\n",
}
# Two positive snippets (one with a Latin-1 character) and one negative, as the files hold them.
POLARITY = {"pos": "a gorgeous , witty film . \nun film très bien . \n",
            "neg": "dull and long . \n"}
TEMPERATURES = "Date,Temp\n1981-01-01,20.7\n1981-01-02,17.9\n"


def idx(array: list, shape: list[int]) -> bytes:
    """A gzipped unsigned-byte IDX file (the MNIST format)."""
    head = (0x0800 + len(shape)).to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in shape)
    return gzip.compress(head + bytes(array))


def sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def files_under(folder: pathlib.Path) -> list[str]:
    """Every file under ``folder`` (hidden temporary files included), relative, sorted."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


class Server:
    """A real HTTP server on 127.0.0.1 serving a folder; counts the GET requests."""

    def __init__(self, root: pathlib.Path, truncate: bool = False):
        self.requests = []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                if not truncate:
                    return super().do_GET()
                # Announce the whole file, send half of it, then drop the connection.
                raw = (root / self.path.lstrip("/")).read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw[: len(raw) // 2])
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.start(functools.partial(Handler, directory=str(root)))

    def start(self, handler):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class Scripted(Server):
    """A real HTTP server on 127.0.0.1 answering each path as scripted: ``(status, body,
    announced length or None)``; a body shorter than announced is a dropped connection."""

    def __init__(self, answers: dict[str, tuple[int, bytes, int | None]]):
        self.requests = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                status, body, announced = answers[self.path]
                self.send_response(status)
                length = len(body) if announced is None else announced
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.start(Handler)


@pytest.fixture
def scripted():
    """Starts ``Scripted`` servers, closed after the test."""
    servers = []

    def start(answers):
        servers.append(Scripted(answers))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture
def remote(tmp_path):
    """The folder the server publishes, with a small corpus and a small Multi30k in it."""
    root = tmp_path / "remote"
    (root / "tinyshakespeare").mkdir(parents=True)
    (root / SHAKESPEARE).write_bytes(TEXT.encode())
    (root / "multi30k").mkdir()
    for split in data.SPLITS:
        for lang, text in SENTENCES.items():
            (root / f"multi30k/{split}.{lang}.gz").write_bytes(gzip.compress(text.encode()))
    (root / "movie-review-polarity").mkdir()
    for name, text in POLARITY.items():
        (root / f"movie-review-polarity/rt-polarity.{name}").write_bytes(text.encode("latin-1"))
    (root / "mnist").mkdir()
    (root / "mnist/t10k-images-idx3-ubyte.gz").write_bytes(idx(list(range(2 * 2 * 3)), [2, 2, 3]))
    (root / "mnist/t10k-labels-idx1-ubyte.gz").write_bytes(idx([7, 2], [2]))
    (root / "temperatures").mkdir()
    (root / "temperatures/daily-min-temperatures.csv").write_text(TEMPERATURES)
    return root


def serve(remote, monkeypatch, truncate=False):
    """Start a server for ``remote`` and point every entry of ``FILES`` at it."""
    server = Server(remote, truncate)
    files = {
        name: ((f"{server.url}/{name}",), sha256((remote / name).read_bytes()))
        for name in data.FILES
    }
    monkeypatch.setattr(data, "FILES", files)
    return server


@pytest.fixture
def server(remote, monkeypatch):
    server = serve(remote, monkeypatch)
    yield server
    server.close()


@pytest.fixture
def local(tmp_path, monkeypatch):
    """An empty data directory, named by SEQLIB_DATA_DIR."""
    folder = tmp_path / "data"
    monkeypatch.setenv(data.DATA_VARIABLE, str(folder))
    return folder


def closed_port() -> int:
    """A localhost port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- registry and resolution


def test_files_registry_names_every_file_with_its_canonical_address():
    names = {"tinyshakespeare/input.txt"} | {
        f"multi30k/{s}.{lang}.gz"
        for s in ("train", "val", "test_2016_flickr")
        for lang in "en fr de".split()
    }
    names |= {"movie-review-polarity/rt-polarity.pos", "movie-review-polarity/rt-polarity.neg",
              "mnist/t10k-images-idx3-ubyte.gz", "mnist/t10k-labels-idx1-ubyte.gz",
              "temperatures/daily-min-temperatures.csv"}
    assert set(data.FILES) == names
    for name, (urls, digest) in data.FILES.items():
        url = urls[0]  # the canonical address comes first
        assert url.startswith("https://") and url.endswith(name.split("/")[-1])
        assert len(digest) == 64 and int(digest, 16) >= 0
    assert data.FILES["multi30k/val.de.gz"][0][0] == (
        "https://github.com/multi30k/dataset/raw/master/data/task1/raw/val.de.gz"
    )


def test_every_file_has_a_mirror_on_another_host():
    for name, (urls, _) in data.FILES.items():
        assert isinstance(urls, tuple) and len(urls) >= 2, name
        assert len(set(urls)) == len(urls), name
        assert all(url.startswith("https://") for url in urls), name
        hosts = {urllib.parse.urlsplit(url).hostname for url in urls}
        assert len(hosts) >= 2, f"{name}: every address on {hosts}"
        for url in urls:
            if urllib.parse.urlsplit(url).hostname == "cdn.jsdelivr.net":
                assert re.search(r"@[0-9a-f]{40}/", url), f"{url} is not pinned to a commit"


def test_resolution_order_argument_then_variable_then_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path / "variable"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data.resolve_data_dir(tmp_path / "argument") == tmp_path / "argument"
    assert data.resolve_data_dir(str(tmp_path / "argument")) == tmp_path / "argument"
    assert data.resolve_data_dir() == tmp_path / "variable"
    monkeypatch.setenv(data.DATA_VARIABLE, "")  # empty counts as unset
    assert data.resolve_data_dir() == tmp_path / "xdg" / "seqlib"
    monkeypatch.delenv(data.DATA_VARIABLE)
    assert data.resolve_data_dir() == tmp_path / "xdg" / "seqlib"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert data.resolve_data_dir() == tmp_path / "home" / ".cache" / "seqlib"
    assert data.resolve_data_dir("~/books") == tmp_path / "home" / "books"


def test_resolution_rejects_a_non_path():
    with pytest.raises(TypeError, match="data_dir must be a str or path, got int"):
        data.resolve_data_dir(3)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"name must be one of .*tinyshakespeare/input.txt"):
        data.fetch("shakespeare.txt")


def test_import_does_not_touch_the_network():
    code = (
        "import socket\n"
        "def refuse(*args, **kwargs): raise AssertionError('network used at import')\n"
        "socket.socket.connect = socket.create_connection = socket.getaddrinfo = refuse\n"
        "import seqlib.data\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ---------------------------------------------------------------------------- downloads


def test_downloads_when_missing_then_uses_the_local_copy(server, local, remote):
    path = data.fetch(SHAKESPEARE)
    assert path == local / SHAKESPEARE
    assert path.read_bytes() == (remote / SHAKESPEARE).read_bytes()
    assert server.requests == ["/" + SHAKESPEARE]
    assert data.tiny_shakespeare() == TEXT
    assert data.fetch(SHAKESPEARE, local) == path
    assert len(server.requests) == 1  # verified, not downloaded again
    assert files_under(local) == [SHAKESPEARE]  # no temporary file left behind


def test_a_present_file_is_never_downloaded(server, tmp_path, remote, monkeypatch):
    monkeypatch.delenv(data.DATA_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "nowhere"))
    assert data.multi30k("val", "de", "en", data_dir=remote)[0] == (
        "Zwei Hunde spielen.",
        "Two dogs play.",
    )
    assert data.tiny_shakespeare(remote) == TEXT
    assert server.requests == []
    assert not (tmp_path / "nowhere").exists()


def test_checksum_mismatch_on_download_discards_the_file(server, local, monkeypatch):
    urls, good = data.FILES[SHAKESPEARE]
    monkeypatch.setitem(data.FILES, SHAKESPEARE, (urls, "0" * 64))
    with pytest.raises(ValueError, match="checksum mismatch") as info:
        data.fetch(SHAKESPEARE)
    message = str(info.value)
    assert SHAKESPEARE in message and "0" * 64 in message and good in message
    assert files_under(local) == []


def test_checksum_mismatch_on_a_local_file_is_reported_not_used(server, local, monkeypatch):
    path = local / SHAKESPEARE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"Second Citizen:\n")
    with pytest.raises(ValueError, match="delete it and retry") as info:
        data.tiny_shakespeare()
    message = str(info.value)
    assert str(path) in message
    assert data.FILES[SHAKESPEARE][1] in message and sha256(b"Second Citizen:\n") in message
    assert server.requests == []
    assert path.read_bytes() == b"Second Citizen:\n"  # left for the user to delete


def test_a_dropped_connection_leaves_no_file(remote, local, monkeypatch):
    server = serve(remote, monkeypatch, truncate=True)
    try:
        with pytest.raises(data.DownloadError, match=r"received \d+ of \d+ bytes"):
            data.fetch("multi30k/train.de.gz")
    finally:
        server.close()
    assert server.requests == ["/multi30k/train.de.gz"]
    assert files_under(local) == []


def test_offline_error_names_the_file_the_address_and_the_variable(local, monkeypatch):
    url = f"http://127.0.0.1:{closed_port()}/multi30k/val.fr.gz"
    monkeypatch.setitem(data.FILES, "multi30k/val.fr.gz", (url, "0" * 64))
    with pytest.raises(ConnectionError) as info:
        data.fetch("multi30k/val.fr.gz")
    message = str(info.value)
    assert "multi30k/val.fr.gz" in message and url in message and "SEQLIB_DATA_DIR" in message
    assert files_under(local) == []


def test_http_error_is_a_download_error(server, local, monkeypatch):
    monkeypatch.setitem(data.FILES, SHAKESPEARE, (server.url + "/missing.txt", "0" * 64))
    with pytest.raises(data.DownloadError, match="404"):
        data.fetch(SHAKESPEARE)
    assert files_under(local) == []


# ------------------------------------------------------------------------------ mirrors


def use_addresses(monkeypatch, name: str, urls: tuple[str, ...], raw: bytes = TEXT.encode()):
    """Give ``name`` these addresses, expecting the bytes ``raw``."""
    monkeypatch.setitem(data.FILES, name, (urls, sha256(raw)))


def test_a_refused_address_falls_back_to_the_next(server, local, monkeypatch, capsys):
    refused = f"http://127.0.0.1:{closed_port()}/input.txt"
    mirror = f"{server.url}/{SHAKESPEARE}"
    use_addresses(monkeypatch, SHAKESPEARE, (refused, mirror))
    path = data.fetch(SHAKESPEARE)
    assert path.read_bytes() == TEXT.encode()
    assert server.requests == ["/" + SHAKESPEARE]
    assert files_under(local) == [SHAKESPEARE]
    err = capsys.readouterr().err
    assert f"{SHAKESPEARE}: {refused} failed: could not connect" in err and "refused" in err
    assert f"{SHAKESPEARE}: downloaded from {mirror}" in err


def test_wrong_bytes_from_one_address_do_not_stop_the_next(
    server, scripted, local, monkeypatch, capsys
):
    other = b"Second Citizen:\n"
    wrong = scripted({"/input.txt": (200, other, None)})
    mirror = f"{server.url}/{SHAKESPEARE}"
    use_addresses(monkeypatch, SHAKESPEARE, (wrong.url + "/input.txt", mirror))
    assert data.tiny_shakespeare() == TEXT
    assert wrong.requests == ["/input.txt"] and server.requests == ["/" + SHAKESPEARE]
    assert files_under(local) == [SHAKESPEARE]
    err = capsys.readouterr().err
    assert f"{wrong.url}/input.txt failed: checksum mismatch: got sha256 {sha256(other)}" in err
    assert f"{SHAKESPEARE}: downloaded from {mirror}" in err


@pytest.mark.parametrize("status", [404, 500])
def test_an_http_error_falls_back_to_the_next(
    status, server, scripted, local, monkeypatch, capsys
):
    failing = scripted({"/input.txt": (status, b"no file here\n", None)})
    mirror = f"{server.url}/{SHAKESPEARE}"
    use_addresses(monkeypatch, SHAKESPEARE, (failing.url + "/input.txt", mirror))
    assert data.fetch(SHAKESPEARE).read_bytes() == TEXT.encode()
    assert failing.requests == ["/input.txt"]
    assert files_under(local) == [SHAKESPEARE]
    err = capsys.readouterr().err
    assert f"{failing.url}/input.txt failed: HTTP error {status}" in err
    assert f"{SHAKESPEARE}: downloaded from {mirror}" in err


def reasons(message: str) -> dict[str, str]:
    """The error's ``address: what went wrong`` lines, in order."""
    return dict(line.strip().split(": ", 1) for line in message.splitlines() if line[:2] == "  ")


def test_when_every_address_fails_the_error_names_each_and_what_it_did(
    scripted, local, monkeypatch
):
    raw = TEXT.encode()
    other = b"Second Citizen:\n"
    refused = f"http://127.0.0.1:{closed_port()}/input.txt"
    remote = scripted({
        "/missing": (404, b"no file here\n", None),
        "/broken": (500, b"internal error\n", None),
        "/other": (200, other, None),
        "/short": (200, raw[:10], len(raw)),
    })
    urls = (refused, *(remote.url + path for path in ("/missing", "/broken", "/other", "/short")))
    use_addresses(monkeypatch, SHAKESPEARE, urls, raw)
    with pytest.raises(data.DownloadError) as info:
        data.fetch(SHAKESPEARE)
    message = str(info.value)
    said = reasons(message)
    assert list(said) == list(urls)  # every address, in the order tried
    assert said[refused].startswith("could not connect") and "refused" in said[refused]
    assert said[urls[1]].startswith("HTTP error 404")
    assert said[urls[2]].startswith("HTTP error 500")
    assert said[urls[3]] == f"checksum mismatch: got sha256 {sha256(other)}"
    assert said[urls[4]] == f"short read: received 10 of {len(raw)} bytes"
    assert repr(SHAKESPEARE) in message and sha256(raw) in message
    assert "SEQLIB_DATA_DIR" in message and str(local / SHAKESPEARE) in message
    assert remote.requests == ["/missing", "/broken", "/other", "/short"]
    assert files_under(local) == []  # no partial or unverified file left behind


def test_when_every_address_serves_other_bytes_it_is_a_value_error(scripted, local, monkeypatch):
    one, two = b"one\n", b"two\n"
    remote = scripted({"/a": (200, one, None), "/b": (200, two, None)})
    urls = (remote.url + "/a", remote.url + "/b")
    use_addresses(monkeypatch, SHAKESPEARE, urls)
    with pytest.raises(ValueError, match="checksum mismatch") as info:
        data.fetch(SHAKESPEARE)
    assert not isinstance(info.value, data.DownloadError)
    said = reasons(str(info.value))
    assert said == {urls[0]: f"checksum mismatch: got sha256 {sha256(one)}",
                    urls[1]: f"checksum mismatch: got sha256 {sha256(two)}"}
    assert files_under(local) == []


# ------------------------------------------------------------------------------ Multi30k


def test_multi30k_pairs_line_i_with_line_i(server, local):
    assert data.multi30k("train") == [
        ("Two dogs play.", "Deux chiens jouent."),
        (" A man  runs. ", " Un homme  court. "),
        ("A red car.", "Une voiture rouge."),
    ]
    assert data.multi30k("test_2016_flickr", src="de", tgt="en")[2] == (
        "Ein rotes Auto.",
        "A red car.",
    )
    assert len(server.requests) == 4  # train.en, train.fr, test.de, test.en


@pytest.mark.parametrize(
    "broken",
    [
        b"not a gzip file at all\n",
        gzip.compress(b"Two dogs play.\n")[:-10],
        gzip.compress(b"\xff\xfe\n"),
    ],
    ids=["not-gzip", "truncated", "not-utf8"],
)
def test_corrupted_gzip_is_a_value_error_naming_the_file(broken, local, monkeypatch):
    path = local / "multi30k/val.en.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(broken)
    good = gzip.compress(SENTENCES["fr"].encode())
    (local / "multi30k/val.fr.gz").write_bytes(good)
    # Bypass the registry's checksums so that the broken file reaches the reader.
    monkeypatch.setitem(data.FILES, "multi30k/val.en.gz", ("http://unused", sha256(broken)))
    monkeypatch.setitem(data.FILES, "multi30k/val.fr.gz", ("http://unused", sha256(good)))
    with pytest.raises(ValueError, match="not a valid gzip file") as info:
        data.multi30k("val")
    assert str(path) in str(info.value)


def test_mismatched_line_counts_name_both_files(remote, local, monkeypatch):
    (remote / "multi30k/val.fr.gz").write_bytes(gzip.compress(b"Deux chiens jouent.\n"))
    server = serve(remote, monkeypatch)
    try:
        with pytest.raises(ValueError, match="line counts differ") as info:
            data.multi30k("val")
    finally:
        server.close()
    message = str(info.value)
    assert "val.en.gz has 3 lines" in message and "val.fr.gz has 1" in message


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"split": "test"},
            r"split must be one of \['train', 'val', 'test_2016_flickr'\], got 'test'",
        ),
        ({"split": "val", "src": "es"}, r"src must be one of \['en', 'fr', 'de'\], got 'es'"),
        ({"split": "val", "tgt": "EN"}, r"tgt must be one of \['en', 'fr', 'de'\], got 'EN'"),
        ({"split": "val", "src": "fr", "tgt": "fr"}, r"src and tgt must differ, got 'fr' for both"),
    ],
)
def test_multi30k_validates_its_arguments(kwargs, expected, tmp_path):
    with pytest.raises(ValueError, match=expected):
        data.multi30k(**kwargs, data_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # rejected before any file is touched


# ------------------------------------------------- sentiment, digits and temperatures


def test_the_three_task_loaders_read_their_formats(server, local):
    assert datasets.movie_reviews() == [
        ("a gorgeous , witty film .", 1), ("un film très bien .", 1), ("dull and long .", 0)]
    images, labels = datasets.mnist_test()
    assert images.dtype == torch.uint8 and images.shape == (2, 2, 3)
    assert images[1].tolist() == [[6, 7, 8], [9, 10, 11]]
    assert labels.dtype == torch.int64 and labels.tolist() == [7, 2]
    dates, temps = datasets.daily_min_temperatures()
    assert dates == [datetime.date(1981, 1, 1), datetime.date(1981, 1, 2)]
    assert temps.dtype == torch.float64 and temps.tolist() == [20.7, 17.9]
    assert len(server.requests) == 5


def bypass(monkeypatch, local, name: str, raw: bytes):
    """Write ``raw`` as the local copy of ``name`` and accept its checksum."""
    path = local / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    monkeypatch.setitem(data.FILES, name, ("http://unused", sha256(raw)))
    return path


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"not gzip", "not a valid gzip file"),
        (idx([1, 2], [2]), r"IDX magic number 0x0801, expected 0x0803"),
        (idx([1, 2, 3], [1, 2, 2])[:-8], "is not a valid gzip file"),
        (gzip.compress((0x0803).to_bytes(4, "big") + b"\0\0\0\2" * 3 + b"\0"),
         r"1 data bytes for shape \[2, 2, 2\]"),
    ],
    ids=["not-gzip", "wrong-dimensions", "truncated", "short-body"],
)
def test_broken_mnist_files_are_value_errors_naming_the_file(raw, expected, local, monkeypatch):
    path = bypass(monkeypatch, local, "mnist/t10k-images-idx3-ubyte.gz", raw)
    with pytest.raises(ValueError, match=expected) as info:
        datasets.mnist_test()
    assert str(path) in str(info.value)


def test_mnist_images_and_labels_must_match(local, monkeypatch):
    bypass(monkeypatch, local, "mnist/t10k-images-idx3-ubyte.gz", idx([0] * 4, [1, 2, 2]))
    bypass(monkeypatch, local, "mnist/t10k-labels-idx1-ubyte.gz", idx([3, 4], [2]))
    with pytest.raises(ValueError, match="1 images but 2 labels"):
        datasets.mnist_test()


@pytest.mark.parametrize(
    ("csv", "expected"),
    [
        ("date,temp\n1981-01-01,20.7\n", "header 'date,temp', expected 'Date,Temp'"),
        ("Date,Temp\n1981-01-01,20.7\n1981-13-01,3.0\n", r"line 3: '1981-13-01,3.0'"),
        ("Date,Temp\n1981-01-01,?0.2\n", r"line 2: '1981-01-01,\?0.2'"),
    ],
    ids=["header", "date", "value"],
)
def test_broken_temperature_rows_are_named(csv, expected, local, monkeypatch):
    bypass(monkeypatch, local, "temperatures/daily-min-temperatures.csv", csv.encode())
    with pytest.raises(ValueError, match=expected):
        datasets.daily_min_temperatures()


# ------------------------------------------------------------------------ the real data

real = pytest.mark.skipif(
    not os.environ.get(data.DATA_VARIABLE),
    reason="set SEQLIB_DATA_DIR to a folder holding the data sets to test them",
)


@real
def test_tiny_shakespeare_real():
    text = data.tiny_shakespeare()
    assert len(text) == 1_115_394
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")


@real
@pytest.mark.parametrize(
    ("split", "size"), [("train", 29_000), ("val", 1_014), ("test_2016_flickr", 1_000)]
)
@pytest.mark.parametrize(("src", "tgt"), [("en", "fr"), ("en", "de"), ("de", "en")])
def test_multi30k_real_sizes(split, size, src, tgt):
    pairs = data.multi30k(split, src, tgt)
    assert len(pairs) == size
    assert all(s.strip() and t.strip() and "\n" not in s + t for s, t in pairs)


@real
def test_multi30k_real_first_training_pair():
    en, fr = data.multi30k("train")[0]
    assert en == "Two young, White males are outside near many bushes."
    assert fr == "Deux jeunes hommes blancs sont dehors près de buissons."
    de, en_again = data.multi30k("train", "de", "en")[0]
    assert (de, en_again) == (
        "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
        en,
    )


@real
def test_movie_reviews_real():
    pairs = datasets.movie_reviews()
    assert len(pairs) == 10_662 and sum(label for _, label in pairs) == 5_331
    assert pairs[0][0].startswith("the rock is destined to be the 21st century's new")
    assert all(sentence and "\n" not in sentence for sentence, _ in pairs)


@real
def test_mnist_test_real():
    images, labels = datasets.mnist_test()
    assert images.shape == (10_000, 28, 28) and int(images.max()) == 255
    assert labels[:10].tolist() == [7, 2, 1, 0, 4, 1, 4, 9, 5, 9]
    assert torch.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028,
                                               974, 1009]


@real
def test_daily_min_temperatures_real():
    dates, temps = datasets.daily_min_temperatures()
    assert len(dates) == len(temps) == 3_650
    assert (dates[0], dates[-1]) == (datetime.date(1981, 1, 1), datetime.date(1990, 12, 31))
    assert temps[0] == 20.7 and all(b > a for a, b in zip(dates, dates[1:], strict=False))
    # 365 rows a year: the leap years 1984 and 1988 lack their 31 December
    assert [d.year for d in dates].count(1984) == 365
    assert datetime.date(1984, 12, 31) not in dates and datetime.date(1984, 12, 30) in dates
