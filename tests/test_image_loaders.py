"""Image loaders (hasfl.data.cifar10, .emnist, .digits) on tiny files fabricated in torchvision's exact on-disk formats.

No test touches the network: every call passes download=False, and the download-failure
tests replace torchvision's ``download`` with a function that raises.
"""

from __future__ import annotations

import pickle
import struct
from collections import Counter
from pathlib import Path
from urllib.error import URLError

import numpy as np
import pytest
import torch

from hasfl.data.base import DatasetBundle, DatasetUnavailable
from hasfl.data.cifar10 import CIFAR10_FILES, fetch_cifar10, load_cifar10
from hasfl.data.digits import load_digits
from hasfl.data.emnist import EMNIST_FILES, fetch_emnist, load_emnist

CIFAR_NAMES = ["cifar", "auto", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
EMNIST_RAW = Path("EMNIST/raw")


# --------------------------------------------------------------------------- fabrication
def _write_cifar(root: Path, per_batch: int = 4, n_test: int = 6, seed: int = 0) -> dict[str, np.ndarray]:
    """Write the 7 CIFAR-10 files (pickled dicts, uint8 rows of 1024 R, 1024 G, 1024 B)."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rows, labels = [], []
    for b in range(1, 6):
        data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
        lab = [int(v) for v in rng.integers(0, 10, size=per_batch)]
        if b == 1:
            # known pixel: sample 0, row 2, column 5 -> R=201, G=7, B=99
            data[0, 0 * 1024 + 2 * 32 + 5] = 201
            data[0, 1 * 1024 + 2 * 32 + 5] = 7
            data[0, 2 * 1024 + 2 * 32 + 5] = 99
        entry = {"batch_label": f"training batch {b} of 5", "data": data, "labels": lab,
                 "filenames": [f"img_{b}_{i}.png" for i in range(per_batch)]}
        with open(folder / f"data_batch_{b}", "wb") as f:
            pickle.dump(entry, f)
        rows.append(data)
        labels.extend(lab)
    test = rng.integers(0, 256, size=(n_test, 3072), dtype=np.uint8)
    test_lab = [int(v) for v in rng.integers(0, 10, size=n_test)]
    with open(folder / "test_batch", "wb") as f:
        pickle.dump({"batch_label": "testing batch 1 of 1", "data": test, "labels": test_lab,
                     "filenames": [f"t_{i}.png" for i in range(n_test)]}, f)
    with open(folder / "batches.meta", "wb") as f:
        pickle.dump({"label_names": CIFAR_NAMES, "num_cases_per_batch": per_batch, "num_vis": 3072}, f)
    return {"train": np.vstack(rows), "train_y": np.array(labels), "test": test, "test_y": np.array(test_lab)}


def _idx_bytes(arr: np.ndarray) -> bytes:
    """IDX encoding: 00 00 08 <ndim>, big-endian uint32 dims, uint8 data."""
    assert arr.dtype == np.uint8
    return bytes([0, 0, 8, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes()


def _write_emnist(root: Path, n_train: int = 7, n_test: int = 3, seed: int = 1) -> dict[str, np.ndarray]:
    """Write the four uncompressed byclass IDX files; images as stored (i.e. transposed)."""
    rng = np.random.default_rng(seed)
    raw = root / EMNIST_RAW
    raw.mkdir(parents=True)
    out: dict[str, np.ndarray] = {}
    for part, n in (("train", n_train), ("test", n_test)):
        imgs = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labs = rng.integers(0, 62, size=n).astype(np.uint8)
        if part == "train":
            imgs[0] = 0
            imgs[0, 3, 20] = 255  # asymmetric: stored at (row 3, col 20) -> upright at (row 20, col 3)
            labs[0], labs[1] = 0, 61
        (raw / f"emnist-byclass-{part}-images-idx3-ubyte").write_bytes(_idx_bytes(imgs))
        (raw / f"emnist-byclass-{part}-labels-idx1-ubyte").write_bytes(_idx_bytes(labs))
        out[part], out[f"{part}_y"] = imgs, labs
    return out


def _np_stats(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean/population std of (N, C, H, W) uint8 in [0, 1] units."""
    f = x.astype(np.float64) / 255.0
    return f.mean(axis=(0, 2, 3)), f.std(axis=(0, 2, 3))


# --------------------------------------------------------------------------- file tables
def test_file_tables_match_torchvision(tmp_path: Path) -> None:
    from torchvision.datasets import CIFAR10, EMNIST

    names = [n for n, _ in CIFAR10.train_list + CIFAR10.test_list] + [CIFAR10.meta["filename"]]
    assert list(CIFAR10_FILES) == [f"{CIFAR10.base_folder}/{n}" for n in names]
    _write_emnist(tmp_path)
    expected = []
    for train in (True, False):
        ds = EMNIST(root=str(tmp_path), split="byclass", train=train, download=False)
        expected += [ds.images_file, ds.labels_file]
    assert [str(tmp_path / f) for f in EMNIST_FILES] == expected
    # the tables are the registry's (the data-stage rule's inputs)
    from hasfl.registry import raw_files

    assert raw_files("cifar10", tmp_path, {}) == [str(tmp_path / f) for f in CIFAR10_FILES]
    assert raw_files("emnist", tmp_path, {}) == expected
    assert raw_files("digits", tmp_path, {}) == []  # scikit-learn ships it


# --------------------------------------------------------------------------- CIFAR-10
def test_cifar10_fabricated_loads_without_md5(tmp_path: Path) -> None:
    ref = _write_cifar(tmp_path)
    b = load_cifar10(tmp_path, download=False, verify_md5=False)
    assert isinstance(b, DatasetBundle)
    assert (b.name, b.task, b.num_classes, b.input_shape) == ("cifar10", "image", 10, (3, 32, 32))
    assert b.train_x.shape == (20, 3, 32, 32) and b.test_x.shape == (6, 3, 32, 32)
    assert b.train_x.dtype == torch.uint8 and b.train_y.dtype == torch.int64 and b.test_y.dtype == torch.int64
    assert b.train_x.is_contiguous()
    # known pixel after HWC -> CHW: (channel, row 2, col 5) of the first train sample
    assert b.train_x[0, :, 2, 5].tolist() == [201, 7, 99]
    # every pixel: row of 3072 = (C, H, W) row-major
    assert np.array_equal(b.train_x.numpy(), ref["train"].reshape(-1, 3, 32, 32))
    assert np.array_equal(b.test_x.numpy(), ref["test"].reshape(-1, 3, 32, 32))
    assert b.train_y.tolist() == ref["train_y"].tolist() and b.test_y.tolist() == ref["test_y"].tolist()
    mean, std = _np_stats(ref["train"].reshape(-1, 3, 32, 32))
    assert all(isinstance(v, float) for v in b.mean + b.std)
    assert np.allclose(b.mean, mean, rtol=0, atol=1e-12) and np.allclose(b.std, std, rtol=0, atol=1e-12)
    z = b.inputs(b.train_x)
    assert z.dtype == torch.float32
    assert torch.allclose(z.mean(dim=(0, 2, 3)), torch.zeros(3), atol=1e-5)
    assert torch.allclose(z.std(dim=(0, 2, 3), unbiased=False), torch.ones(3), atol=1e-5)
    assert b.meta["source"] == "torchvision.datasets.CIFAR10"
    assert b.meta["classes"] == CIFAR_NAMES and b.meta["md5_verified"] is False
    again = load_cifar10(tmp_path, download=False, verify_md5=False)
    assert torch.equal(again.train_x, b.train_x) and again.mean == b.mean and again.std == b.std


def test_cifar10_md5_mismatch_names_batch_file(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    with pytest.raises(DatasetUnavailable) as exc:
        load_cifar10(tmp_path, download=False, verify_md5=True)
    msg = str(exc.value)
    assert "md5" in msg and "data_batch_1" in msg
    assert str(tmp_path / "cifar-10-batches-py" / "data_batch_1") in msg
    with pytest.raises(DatasetUnavailable, match="data_batch_1"):
        fetch_cifar10(tmp_path, download=False)


def test_cifar10_missing_files_message(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as exc:
        load_cifar10(tmp_path, download=False)
    msg = str(exc.value)
    assert "cifar-10-batches-py" in msg and "data_batch_1" in msg
    for name in ["data_batch_5", "test_batch", "batches.meta", "cifar-10-python.tar.gz", "download=False"]:
        assert name in msg
    assert not (tmp_path / "cifar-10-batches-py").exists()  # nothing created when download=False


def test_cifar10_partially_missing_names_missing_file(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "test_batch").unlink()
    with pytest.raises(DatasetUnavailable, match=r"1 of 7 files missing \(test_batch\)"):
        load_cifar10(tmp_path, download=False, verify_md5=False)


def test_cifar10_download_failure_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchvision.datasets import CIFAR10

    def offline(self: object) -> None:
        raise URLError("offline in test")

    monkeypatch.setattr(CIFAR10, "download", offline)
    with pytest.raises(DatasetUnavailable) as exc:
        load_cifar10(tmp_path, download=True)
    msg = str(exc.value)
    assert "data_batch_1" in msg and "cifar-10-batches-py" in msg
    assert "download via torchvision failed: URLError" in msg and "offline in test" in msg
    assert isinstance(exc.value.__cause__, URLError)


def test_cifar10_garbled_pickle_without_md5(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"not a pickle")
    with pytest.raises(DatasetUnavailable, match="could not be read"):
        load_cifar10(tmp_path, download=False, verify_md5=False)


def test_fetch_cifar10_returns_paths(tmp_path: Path) -> None:
    _write_cifar(tmp_path)
    paths = fetch_cifar10(tmp_path, download=False, verify_md5=False)
    assert paths == [tmp_path.absolute() / f for f in CIFAR10_FILES]
    assert all(p.is_file() for p in paths)


# --------------------------------------------------------------------------- EMNIST
def test_emnist_fabricated_loads_upright(tmp_path: Path) -> None:
    ref = _write_emnist(tmp_path)
    b = load_emnist(tmp_path, download=False)
    assert (b.name, b.task, b.num_classes, b.input_shape) == ("emnist", "image", 62, (1, 28, 28))
    assert b.train_x.shape == (7, 1, 28, 28) and b.test_x.shape == (3, 1, 28, 28)
    assert b.train_x.dtype == torch.uint8 and b.train_y.dtype == torch.int64
    # orientation: stored (row 3, col 20) is upright (row 20, col 3)
    assert b.train_x[0, 0, 20, 3] == 255 and b.train_x[0, 0, 3, 20] == 0 and int(b.train_x[0].sum()) == 255
    assert np.array_equal(b.train_x[:, 0].numpy(), ref["train"].transpose(0, 2, 1))
    assert np.array_equal(b.test_x[:, 0].numpy(), ref["test"].transpose(0, 2, 1))
    assert b.train_y.tolist() == ref["train_y"].tolist() and b.test_y.tolist() == ref["test_y"].tolist()
    mean, std = _np_stats(ref["train"][:, None])
    assert len(b.mean) == 1 and len(b.std) == 1
    assert abs(b.mean[0] - mean[0]) < 1e-12 and abs(b.std[0] - std[0]) < 1e-12
    assert b.meta["source"] == "torchvision.datasets.EMNIST" and b.meta["split"] == "byclass"
    assert len(b.meta["classes"]) == 62 and b.meta["classes"][:3] == ["0", "1", "2"] and b.meta["classes"][-1] == "z"
    assert fetch_emnist(tmp_path, download=False) == [tmp_path.absolute() / f for f in EMNIST_FILES]


@pytest.mark.parametrize("name", ["emnist-byclass-test-images-idx3-ubyte", "emnist-byclass-train-labels-idx1-ubyte"])
def test_emnist_truncated_file_named(tmp_path: Path, name: str) -> None:
    _write_emnist(tmp_path)
    path = tmp_path / EMNIST_RAW / name
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(DatasetUnavailable) as exc:
        load_emnist(tmp_path, download=False)
    msg = str(exc.value)
    assert name in msg and "truncated" in msg
    others = [n for n in (tmp_path / EMNIST_RAW).iterdir() if n.name != name]
    assert not any(f"{o}:" in msg for o in others)


def test_emnist_garbled_magic_named(tmp_path: Path) -> None:
    _write_emnist(tmp_path)
    path = tmp_path / EMNIST_RAW / "emnist-byclass-train-images-idx3-ubyte"
    path.write_bytes(b"\x1f\x8b" + path.read_bytes()[2:])  # e.g. a gzip file under the raw name
    with pytest.raises(DatasetUnavailable, match="emnist-byclass-train-images-idx3-ubyte: bad IDX magic"):
        load_emnist(tmp_path, download=False)


def test_emnist_count_mismatch(tmp_path: Path) -> None:
    _write_emnist(tmp_path)
    path = tmp_path / EMNIST_RAW / "emnist-byclass-test-labels-idx1-ubyte"
    path.write_bytes(_idx_bytes(np.zeros(2, dtype=np.uint8)))
    with pytest.raises(DatasetUnavailable, match="3 images but 2 labels"):
        load_emnist(tmp_path, download=False)


def test_emnist_missing_files_message(tmp_path: Path) -> None:
    with pytest.raises(DatasetUnavailable) as exc:
        load_emnist(tmp_path, download=False)
    msg = str(exc.value)
    for rel in EMNIST_FILES:
        assert Path(rel).name in msg and str(tmp_path / rel) in msg
    assert "UNCOMPRESSED" in msg and "gunzip" in msg and "gzip.zip" in msg
    with pytest.raises(DatasetUnavailable, match="4 of 4 files missing"):
        fetch_emnist(tmp_path, download=False)


def test_emnist_gz_only_hints_gunzip(tmp_path: Path) -> None:
    _write_emnist(tmp_path)
    raw = tmp_path / EMNIST_RAW
    for p in list(raw.iterdir()):
        p.rename(p.with_name(p.name + ".gz"))
    with pytest.raises(DatasetUnavailable, match=r"must be gunzipped: emnist-byclass-train-images-idx3-ubyte\.gz"):
        load_emnist(tmp_path, download=False)


def test_emnist_download_failure_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchvision.datasets import EMNIST

    def offline(self: object) -> None:
        raise URLError("offline in test")

    monkeypatch.setattr(EMNIST, "download", offline)
    with pytest.raises(DatasetUnavailable) as exc:
        load_emnist(tmp_path, download=True)
    msg = str(exc.value)
    assert "emnist-byclass-train-images-idx3-ubyte" in msg and "download via torchvision failed: URLError" in msg


# --------------------------------------------------------------------------- digits
def test_digits_split() -> None:
    b = load_digits(test_fraction=0.2, split_seed=0)
    assert (b.name, b.task, b.num_classes, b.input_shape) == ("digits", "image", 10, (1, 8, 8))
    n_train, n_test = b.train_x.shape[0], b.test_x.shape[0]
    assert n_train + n_test == 1797
    assert b.train_x.dtype == torch.uint8 and b.train_y.dtype == torch.int64
    assert int(b.train_x.max()) == 255 and int(b.train_x.min()) == 0
    tr, te = b.meta["train_indices"], b.meta["test_indices"]
    assert not set(tr) & set(te) and sorted(tr + te) == list(range(1797))
    # stratified: per-class test count is round(class_count * test_fraction)
    total = Counter(b.train_y.tolist()) + Counter(b.test_y.tolist())
    assert [total[c] for c in range(10)] == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    test_counts = Counter(b.test_y.tolist())
    assert [test_counts[c] for c in range(10)] == [round(0.2 * total[c]) for c in range(10)]
    assert n_test == 359
    assert b.meta["source"] == "sklearn.datasets.load_digits" and b.meta["classes"] == [str(i) for i in range(10)]
    mean, std = _np_stats(b.train_x.numpy())
    assert abs(b.mean[0] - mean[0]) < 1e-12 and abs(b.std[0] - std[0]) < 1e-12


def test_digits_pixels_match_sklearn() -> None:
    from sklearn.datasets import load_digits as sk

    raw = sk().images
    b = load_digits()
    tr = b.meta["train_indices"]
    expected = np.floor(raw[tr] * 255 / 16 + 0.5).astype(np.uint8)
    assert np.array_equal(b.train_x[:, 0].numpy(), expected)
    assert set(np.unique(b.train_x.numpy())) <= {int(np.floor(v * 255 / 16 + 0.5)) for v in range(17)}
    assert np.array_equal(b.train_y.numpy(), sk().target[tr])


def test_digits_seeded_determinism() -> None:
    a, b = load_digits(split_seed=3), load_digits(split_seed=3)
    assert a.meta["test_indices"] == b.meta["test_indices"]
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y) and a.mean == b.mean
    c = load_digits(split_seed=4)
    assert c.meta["test_indices"] != a.meta["test_indices"]
    d = load_digits(test_fraction=0.3, split_seed=3)
    assert d.test_x.shape[0] == sum(round(0.3 * n) for n in [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])
    with pytest.raises(ValueError):
        load_digits(test_fraction=1.0)
