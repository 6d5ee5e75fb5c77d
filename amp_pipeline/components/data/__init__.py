"""The data path, in one package: a CSV (or TFRecord, or image folder) in, a `DataSpec` out,
examples written.

- the input check the driver runs before TFX: `ingest.py` (prepare: one streaming pass, the
  DataSpec), `inspection.py` (per-column figures, what is excluded and why), `csv_format.py`
  (how a CSV is read, by the check and by ExampleGen alike), `report.py` (`inspect`'s text);
- our CsvExampleGen (`example_gen.py`), the AnomalyCheck component (`anomaly_check.py`);
- Transform's preprocessing (`preprocessing.py`).

May import: `core`, `components.models`.
"""
