"""Request tensors in, response tensors out: TensorProto and TF Serving's REST JSON.

Every check a request can fail happens here, before the model runs, and raises INVALID_ARGUMENT
with a message that names the input: unknown or missing inputs, a wrong dtype, a wrong shape,
ragged JSON lists, malformed `instances`/`inputs`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

import numpy as np

from amp_pipeline.serving.errors import invalid
from amp_pipeline.serving.repository import InputSpec


def _shape_str(shape) -> str:
    return "[" + ",".join("-1" if d is None else str(d) for d in shape) + "]"


def refuse_unknown(signature: str, specs: Mapping[str, InputSpec], given: Mapping) -> None:
    """INVALID_ARGUMENT for the first input name the signature does not take."""
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise invalid(
            f"input '{unknown[0]}' is not an input of signature '{signature}' "
            f"(it takes {sorted(specs)})"
        )


def check_inputs(
    signature: str, specs: Mapping[str, InputSpec], arrays: Mapping[str, np.ndarray]
) -> None:
    """The inputs are exactly the signature's, each with a compatible shape."""
    refuse_unknown(signature, specs, arrays)
    missing = sorted(set(specs) - set(arrays))
    if missing:
        raise invalid(f"signature '{signature}' needs input(s) {missing}, missing from the request")
    batch = None
    for name, array in arrays.items():
        shape = specs[name].shape
        if shape is None:
            continue
        ok = array.ndim == len(shape) and all(
            d is None or d == a for d, a in zip(shape, array.shape, strict=True)
        )
        if not ok:
            raise invalid(
                f"input '{name}': expects shape {_shape_str(shape)}, got {_shape_str(array.shape)}"
            )
        if array.ndim and shape[0] is None:
            if batch is not None and array.shape[0] != batch:
                raise invalid(
                    f"inputs of signature '{signature}' disagree on the batch size: "
                    f"'{name}' has {array.shape[0]}, another input has {batch}"
                )
            batch = array.shape[0]


# -- gRPC: TensorProto -------------------------------------------------------------------


def from_tensor_protos(specs: Mapping[str, InputSpec], protos: Mapping) -> dict[str, np.ndarray]:
    """PredictRequest.inputs -> arrays, refusing a dtype other than the signature's."""
    import tensorflow as tf

    arrays = {}
    for name, proto in protos.items():
        spec = specs.get(name)
        if spec is not None and proto.dtype != spec.dtype.as_datatype_enum:
            got = tf.dtypes.as_dtype(proto.dtype).name if proto.dtype else "DT_INVALID"
            raise invalid(f"input '{name}': expects {spec.dtype.name}, got {got}")
        try:
            arrays[name] = tf.make_ndarray(proto)
        except Exception as e:  # noqa: BLE001 - any malformed TensorProto
            raise invalid(f"input '{name}': malformed TensorProto ({e})") from None
    return arrays


def to_tensor_protos(outputs: Mapping[str, np.ndarray], output_filter=()) -> dict:
    import tensorflow as tf

    names = list(output_filter) or list(outputs)
    for name in names:
        if name not in outputs:
            raise invalid(f"output_filter: '{name}' is not an output (outputs: {sorted(outputs)})")
    return {name: tf.make_tensor_proto(outputs[name]) for name in names}


# -- REST JSON ---------------------------------------------------------------------------


def _decode_b64(value):
    """{"b64": "..."} objects -> bytes, recursively; anything else unchanged."""
    if isinstance(value, dict):
        if set(value) == {"b64"} and isinstance(value["b64"], str):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except ValueError:
                raise invalid('a {"b64": ...} value is not valid base64') from None
        raise invalid(f"unexpected JSON object {sorted(value)} where a tensor value was expected")
    if isinstance(value, list):
        return [_decode_b64(v) for v in value]
    return value


def json_to_array(name: str, value, spec: InputSpec) -> np.ndarray:
    """One input's JSON value -> an array of the signature's dtype, or INVALID_ARGUMENT."""
    value = _decode_b64(value)
    if spec.dtype.name == "string":
        return _string_array(name, value)
    try:
        array = np.array(value)
    except ValueError:
        raise invalid(f"input '{name}': ragged lists (every row needs the same length)") from None
    if array.dtype == object:
        raise invalid(
            f"input '{name}': ragged or mixed-type lists (every row needs the same length and type)"
        )
    dtype = spec.dtype
    kind = array.dtype.kind
    if dtype.is_floating or dtype.is_integer:
        if kind == "b" or kind not in "iuf" or (dtype.is_integer and kind == "f"):
            raise invalid(
                f"input '{name}': expects {dtype.name} values, got JSON {_json_kind(kind)}"
            )
    elif dtype.name == "bool":
        if kind != "b":
            raise invalid(f"input '{name}': expects booleans, got JSON {_json_kind(kind)}")
    return array.astype(dtype.as_numpy_dtype)


def _string_array(name: str, value) -> np.ndarray:
    """An object array of bytes. Not numpy's fixed-width bytes type: it drops trailing NULs,
    which serialized tf.Examples may end with."""
    try:
        array = np.array(value, dtype=object)
    except ValueError:
        raise invalid(f"input '{name}': ragged lists (every row needs the same length)") from None
    flat = array.reshape(-1)
    for i, v in enumerate(flat):
        if isinstance(v, str):
            flat[i] = v.encode()
        elif not isinstance(v, bytes):
            what = "ragged lists" if isinstance(v, list) else f"JSON {type(v).__name__} values"
            raise invalid(f"input '{name}': expects strings, got {what}")
    return flat.reshape(array.shape)


def _json_kind(kind: str) -> str:
    return {"b": "booleans", "i": "integers", "u": "integers", "f": "numbers"}.get(kind, "strings")


def parse_rest_request(body: dict, signature: str, specs: Mapping[str, InputSpec]):
    """A `:predict` body -> (arrays, row_format). Row format: `instances`; columnar: `inputs`."""
    if not isinstance(body, dict):
        raise invalid("the request body must be a JSON object with 'instances' or 'inputs'")
    has_instances, has_inputs = "instances" in body, "inputs" in body
    if has_instances == has_inputs:
        raise invalid(
            "the request body needs exactly one of 'instances' (row) or 'inputs' (columnar)"
        )
    names = sorted(specs)
    if has_instances:
        instances = body["instances"]
        if not isinstance(instances, list) or not instances:
            raise invalid("'instances' must be a non-empty list")
        named = all(isinstance(i, dict) and set(i) != {"b64"} for i in instances)
        if not named:
            if len(names) != 1:
                raise invalid(
                    f"signature '{signature}' has {len(names)} inputs {names}: each instance "
                    "must be an object naming them"
                )
            return {names[0]: json_to_array(names[0], instances, specs[names[0]])}, True
        columns: dict[str, list] = {}
        for i, instance in enumerate(instances):
            if set(instance) != set(columns or instance):
                raise invalid(
                    f"instance {i} names {sorted(instance)}, instance 0 names {sorted(columns)}"
                )
            for k, v in instance.items():
                columns.setdefault(k, []).append(v)
        refuse_unknown(signature, specs, columns)
        return {k: json_to_array(k, v, specs[k]) for k, v in columns.items()}, True
    inputs = body["inputs"]
    if isinstance(inputs, dict):
        refuse_unknown(signature, specs, inputs)
        return {k: json_to_array(k, v, specs[k]) for k, v in inputs.items()}, False
    if len(names) != 1:
        raise invalid(
            f"signature '{signature}' has {len(names)} inputs {names}: 'inputs' must be an "
            "object naming them"
        )
    return {names[0]: json_to_array(names[0], inputs, specs[names[0]])}, False


def _jsonable(array: np.ndarray):
    if array.dtype == object or array.dtype.kind in "SU":

        def text(v):
            if isinstance(v, bytes):
                try:
                    return v.decode("utf-8")
                except UnicodeDecodeError:
                    return {"b64": base64.b64encode(v).decode()}
            return str(v)

        return np.vectorize(text, otypes=[object])(array).tolist() if array.size else []
    return array.tolist()


def to_rest_response(outputs: Mapping[str, np.ndarray], row_format: bool) -> dict:
    """TF Serving's `predictions` (row) or `outputs` (columnar) JSON."""
    if not row_format:
        if len(outputs) == 1:
            return {"outputs": _jsonable(next(iter(outputs.values())))}
        return {"outputs": {k: _jsonable(v) for k, v in outputs.items()}}
    columns = {k: _jsonable(v) for k, v in outputs.items()}
    batch = {len(v) if isinstance(v, list) else 1 for v in columns.values()}
    if len(batch) != 1:
        raise invalid("outputs disagree on the batch size: use the columnar 'inputs' format")
    n = batch.pop()
    if len(columns) == 1:
        return {"predictions": next(iter(columns.values()))}
    return {"predictions": [{k: v[i] for k, v in columns.items()} for i in range(n)]}
