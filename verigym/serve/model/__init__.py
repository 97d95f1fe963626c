"""The model server (``verigym serve-model``): an OpenAI-compatible API over a local transformers
model, hosted like the env server (:mod:`verigym.serve.hosting`, :mod:`verigym.serve.front`,
:mod:`verigym.serve.auth`).

* :mod:`verigym.serve.model.server` -- :func:`~verigym.serve.model.server.make_server`, the app,
  its routes and life cycle (:class:`~verigym.serve.model.server.ChatServer`);
* :mod:`verigym.serve.model.requests` -- request validation and limits;
* :mod:`verigym.serve.model.tool_choice` -- ``tool_choice`` forcing;
* :mod:`verigym.serve.model.streaming` -- server-sent events;
* :mod:`verigym.serve.model.batcher` -- the one thread that runs the model.

Nothing is imported here: ``import verigym.serve.model`` does not import torch.
"""
