"""TF Serving's gRPC PredictionService (Predict, GetModelMetadata) and ModelService
(GetModelStatus), on the protos and servicer bases of tensorflow-serving-api."""

from __future__ import annotations

import logging

import grpc
from tensorflow.core.protobuf import error_codes_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from amp_pipeline.serving.errors import ServingError
from amp_pipeline.serving.service import PredictionCore
from amp_pipeline.serving.tensors import from_tensor_protos, to_tensor_protos

logger = logging.getLogger(__name__)

SIGNATURE_DEF = "signature_def"


def _version(model_spec) -> int | None:
    if model_spec.HasField("version"):
        return model_spec.version.value
    if model_spec.version_label:
        raise ServingError(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"version labels are not supported by this server (got '{model_spec.version_label}'); "
            "name a version number",
        )
    return None


def _abort(context: grpc.ServicerContext, error: ServingError):
    logger.info("request refused: %s: %s", error.code.name, error.message)
    context.abort(error.code, error.message)


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, core: PredictionCore):
        self.core = core

    def Predict(self, request: predict_pb2.PredictRequest, context):  # noqa: N802 - gRPC's name
        try:
            servable = self.core.servable(request.model_spec.name, _version(request.model_spec))
            signature = servable.signature(request.model_spec.signature_name)
            arrays = from_tensor_protos(servable.inputs[signature], request.inputs)
            outputs = self.core.predict(servable, signature, arrays, "grpc")
            response = predict_pb2.PredictResponse()
            for name, proto in to_tensor_protos(outputs, request.output_filter).items():
                response.outputs[name].CopyFrom(proto)
        except ServingError as e:
            _abort(context, e)
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature
        return response

    def GetModelMetadata(self, request, context):  # noqa: N802 - gRPC's name
        try:
            fields = list(request.metadata_field)
            if fields != [SIGNATURE_DEF]:
                raise ServingError(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"metadata_field must be ['{SIGNATURE_DEF}'], got {fields}",
                )
            servable = self.core.servable(request.model_spec.name, _version(request.model_spec))
        except ServingError as e:
            _abort(context, e)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.metadata[SIGNATURE_DEF].Pack(servable.signature_def_map)
        return response


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, core: PredictionCore):
        self.core = core

    def GetModelStatus(self, request, context):  # noqa: N802 - gRPC's name
        try:
            entries = self.core.repository.status(
                request.model_spec.name, _version(request.model_spec)
            )
        except ServingError as e:
            _abort(context, e)
        response = get_model_status_pb2.GetModelStatusResponse()
        for entry in entries:
            status = response.model_version_status.add()
            status.version = int(entry["version"])
            status.state = getattr(get_model_status_pb2.ModelVersionStatus, entry["state"])
            if entry["status"]["error_code"] != "OK":
                code = entry["status"]["error_code"]
                status.status.error_code = error_codes_pb2.Code.Value(code)
                status.status.error_message = entry["status"]["error_message"]
        return response


def add_services(server: grpc.Server, core: PredictionCore) -> None:
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(core), server
    )
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(core), server)
