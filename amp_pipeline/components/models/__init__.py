"""The model architectures: the built-in ones (`builtin.py`: the digits CNN, mlp, transformer,
ResNet-50) and the user's model module (`user_module.py`: loading it, its contract, building
from it).

May import: `core`.
"""
