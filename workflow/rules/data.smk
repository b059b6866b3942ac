# Data stage: raw datasets -> per dataset x seed partition and client tables.


# One fetch rule per dataset with raw files (fetch_cifar10, fetch_emnist, fetch_fashion_mnist,
# fetch_shakespeare): the registry names the function that makes the files present
# (hasfl.data.fetch). Every data stage waits for the raw files of *every* dataset of the
# preset, so nothing trains until all fetches succeeded, and a failing fetch names the
# preset's other missing datasets in the same message.
FETCHED = [d for d, info in DATASETS.items() if info.fetch is not None]


def preset_raw_files():
    """The raw files of every dataset of the preset."""
    return [
        f
        for d in config["datasets"]
        for f in raw_files(d, DATA_DIR, config["dataset_params"][d])
    ]


for _dataset in FETCHED:

    rule:
        name:
            f"fetch_{_dataset}"
        output:
            raw_files(_dataset, DATA_DIR, config["dataset_params"][_dataset]),
        log:
            f"{RESULTS}/logs/fetch/{_dataset}.log",
        priority: 100
        localrule: True
        params:
            dataset=_dataset,
            dataset_params={
                k: config["dataset_params"][_dataset][k]
                for k in DATASETS[_dataset].fetch_params
            },
        script:
            "../scripts/fetch.py"


rule data_stage:
    """Seeded partition, capacities and TV ground truth for one dataset x seed."""
    input:
        raw=lambda wc: raw_files(
            wc.dataset, DATA_DIR, config["dataset_params"][wc.dataset]
        ),
        preset_raw=preset_raw_files(),
        rerun=lambda wc: rerun_input(data_folder(wc.dataset, wc.seed)).get("rerun", []),
    output:
        partition=f"{DATA_WC}/partition.parquet",
        clients=f"{DATA_WC}/clients.parquet",
        manifest=f"{DATA_WC}/manifest.json",
    log:
        f"{RESULTS}/logs/data/{{dataset}}/seed{{seed}}.log",
    threads: 1
    resources:
        mem_mb=lambda wc: {"emnist": 8000, "cifar10": 3000}.get(wc.dataset, 1000),
        runtime=20,
    params:
        data_cfg=lambda wc: data_slice(config, wc.dataset),
        code=SRC_DATA,
    script:
        "../scripts/data_stage.py"
