"""The TFX components and the code the Trainer and Transform load, by concept, each component
beside the logic it runs (as TFX lays out `tfx/components/<name>/`):

    models  <  data  <  amp, export  <  training  <  gate

A package imports only those to its left (and `core`, `serving`); `tests/test_layers.py`
checks it. The whole package may import `core` and `serving`, never `pipeline` or above.
"""
