"""TF Serving's protocol and what feeds it: the local server (gRPC + REST), the client, request
checks, batching, deployment files, the infra validation (and its InfraValidator component) and
the Pusher that publishes a promoted model into the serving folder.

May import: `core`.
"""
