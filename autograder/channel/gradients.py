"""Gradients through the student's code across the channel (`autograder.channel.session`).

When a call's arguments include tensors that require grad and the result depends on them, the
sandbox keeps the graph under a token. `attach` rebuilds the result's tensors here as outputs of
`_RemoteGrad`, whose inputs are the trusted side's own argument tensors; its backward sends the
outputs' gradients to the sandbox and returns the gradients it computes for each argument. So
``out.backward(g)`` fills ``q.grad`` here, and ``torch.autograd.gradcheck`` runs as it would in one
process.
"""

from __future__ import annotations

from typing import Any

import torch

from autograder.channel.wire import ChannelError
from autograder.channel.tensors import tensors_in


def _replace(value: Any, replacements: dict[int, torch.Tensor]) -> Any:
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return replacements.get(id(value), value)
    if type(value) is list:
        return [_replace(item, replacements) for item in value]
    if type(value) is tuple:
        return tuple(_replace(item, replacements) for item in value)
    if type(value) is dict:
        return {key: _replace(item, replacements) for key, item in value.items()}
    return value


class _RemoteGrad(torch.autograd.Function):
    """Outputs computed in the sandbox, differentiable here through the sandbox's graph."""

    @staticmethod
    def forward(ctx, session, token: int, outputs: list[torch.Tensor], *inputs: torch.Tensor):  # noqa: ANN001
        ctx.session, ctx.token, ctx.inputs = session, token, len(inputs)
        return tuple(outputs)

    @staticmethod
    def backward(ctx, *grads: torch.Tensor):  # noqa: ANN001
        found = ctx.session.backward(ctx.token, list(grads))
        if len(found) != ctx.inputs or any(g is not None and type(g) is not torch.Tensor for g in found):
            raise ChannelError("the kernel answered backward with the wrong gradients")
        return (None, None, None, *found)


def attach(session, value: Any, args: tuple, kwargs: dict, token: Any) -> Any:  # noqa: ANN001
    """``value`` with the tensors the sandbox marked as depending on the arguments made differentiable."""
    if type(token) is not tuple or len(token) != 2 or type(token[0]) is not int or type(token[1]) is not list:
        raise ChannelError("the kernel sent a malformed gradient token")
    inputs = [t for t in tensors_in([*args, *kwargs.values()]) if t.requires_grad]
    found = tensors_in(value)
    if len(found) != len(token[1]) or not inputs:
        raise ChannelError("the kernel's gradient token does not match its answer")
    outputs = [t.detach() for t, marked in zip(found, token[1]) if marked is True]
    if not outputs or not torch.is_grad_enabled():
        return value
    rebuilt = _RemoteGrad.apply(session, token[0], outputs, *inputs)
    marked = [t for t, flag in zip(found, token[1]) if flag is True]
    return _replace(value, {id(old): new for old, new in zip(marked, rebuilt)})
