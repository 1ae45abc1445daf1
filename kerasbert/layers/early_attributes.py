"""Sublayers kept as attributes before a functional model's `__init__`.

A functional model of the zoo builds its sublayers first (they make the
graph that `keras.Model.__init__` takes) and keeps them as attributes
(`self.embeddings`, `self.transformer_layers`). On the PyTorch backend a
Keras layer is a `torch.nn.Module`, which refuses a module attribute before
its own `__init__` has run ("cannot assign module before Module.__init__()
call"). `EarlyAttributes` holds such attributes aside until the model is
initialised; `attach_early_attributes()` then sets them as usual. On the
other backends nothing is held.
"""

import keras


def _held(model):
    """Whether attributes set now must wait (PyTorch, before Module.__init__)."""
    return keras.config.backend() == "torch" and "_modules" not in model.__dict__


class EarlyAttributes:
    """Mixin for a `keras.Model` subclass that sets attributes before
    calling `keras.Model.__init__`; it must call `attach_early_attributes()`
    right after that call."""

    def __setattr__(self, name, value):
        if _held(self):
            self.__dict__.setdefault("_early_attributes", {})[name] = value
            return
        super().__setattr__(name, value)

    def __getattr__(self, name):
        early = self.__dict__.get("_early_attributes")
        if early is not None and name in early:
            return early[name]
        parent = getattr(super(), "__getattr__", None)
        if parent is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return parent(name)

    def attach_early_attributes(self):
        """Sets the attributes held before `__init__` (none off PyTorch)."""
        for name, value in self.__dict__.pop("_early_attributes", {}).items():
            setattr(self, name, value)
