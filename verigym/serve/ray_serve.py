"""``verigym serve-env --ray``: the same ASGI app as replicas of a Ray Serve deployment.

Each replica builds its own app (:func:`verigym.serve.create_app`) from the
:class:`~verigym.serve.ServeConfig`, so limits (``max_sessions``, ``workers``, timeouts) hold per
replica, and the token is checked by the app on every request and upgrade. Ray Serve's HTTP proxy
(one per node) accepts the connections and hands each one to a replica for its whole life: a
WebSocket session stays on the replica that built its env (session affinity by construction),
while new sessions spread over the replicas.

A cluster user starts it on the head node (``RAY_ADDRESS`` or ``--ray-address`` names the
cluster; ``--host 0.0.0.0 --token ...`` to accept other machines) and points trainers at
``http://<head-node>:<port>``; ``verigym.remote`` and OpenEnv's clients need no change.
"""

from __future__ import annotations

import logging
from typing import Any

from verigym.serve.served import ServeConfig

__all__ = ["deploy", "shutdown"]

logger = logging.getLogger(__name__)

APP_NAME = "verigym-envs"


def deploy(
    config: ServeConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    replicas: int = 1,
    address: str | None = None,
) -> str:
    """Start (or join) Ray, and run ``config`` as ``replicas`` replicas behind Ray Serve's proxy.

    Args:
        config: what each replica serves (already checked: a non-loopback host needs a token).
        host, port: where Ray Serve's HTTP proxy listens.
        replicas: replicas of the deployment (each an actor with its own env sessions).
        address: a Ray cluster address (default: ``RAY_ADDRESS``, else a local instance).

    Returns:
        The base URL of the proxy.

    Raises:
        ValueError: ``replicas`` < 1.
        RuntimeError: Ray Serve is not installed (``pip install "ray[serve]"``).
    """
    if replicas < 1:
        raise ValueError(f"replicas must be >= 1, got {replicas}")
    try:
        import ray
        from ray import serve
    except ImportError as exc:
        raise RuntimeError(
            'verigym serve-env --ray needs Ray Serve: pip install "ray[serve]"'
        ) from exc

    if not ray.is_initialized():
        ray.init(
            address=address, include_dashboard=False, log_to_driver=False, configure_logging=False
        )
    serve.start(http_options={"host": host, "port": port}, logging_config={"log_level": "WARNING"})

    def build_app() -> Any:  # runs on each replica
        from verigym.serve.app import create_app

        return create_app(config)

    deployment = serve.deployment(
        serve.ingress(build_app)(),
        name="VerigymEnvs",
        num_replicas=replicas,
        max_ongoing_requests=config.max_sessions,  # an open WebSocket is one ongoing request
        ray_actor_options={"num_cpus": 0},
    )
    serve.run(deployment.bind(), name=APP_NAME, route_prefix="/", blocking=False)
    return f"http://{host}:{port}"


def shutdown() -> None:
    """Delete the deployment and stop Ray Serve and the Ray instance this process started."""
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
