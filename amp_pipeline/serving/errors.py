"""The serving errors: one class, with the gRPC status code and HTTP status it maps to."""

from __future__ import annotations

import grpc

HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 413,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.INTERNAL: 500,
}


class ServingError(Exception):
    """A request the server refuses or cannot answer; `code` is TF Serving's status for it."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 500)


def invalid(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def unavailable(message: str) -> ServingError:
    return ServingError(grpc.StatusCode.UNAVAILABLE, message)
